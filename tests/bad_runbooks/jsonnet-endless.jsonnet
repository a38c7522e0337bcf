{ a: std.foldl(function(acc, x) acc + x, std.range(1, 3000000), 0) }
