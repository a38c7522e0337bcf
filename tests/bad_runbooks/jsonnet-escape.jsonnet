{ pair: { name: 'jsonnet-escape', title: importstr '/etc/passwd', owner: 'x' } }
