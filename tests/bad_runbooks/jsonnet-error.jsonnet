{ a: error 'the runbook author raised this' }
