# gnuplot record_bytes.gp (from docs/perf): draws record_bytes.png from record_bytes.dat.
set terminal pngcairo size 760,380 font 'sans,10'
set output 'record_bytes.png'
set title "Bytes per finished record against a bare twin with the same key and value\nscripts/record\\_bytes, 100,000 records per store; Redis MEMORY USAGE, SQLite dbstat; load average 10-12"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:2.3]
set ylabel 'guard bytes / twin bytes'
set grid ytics
set arrow from graph 0, first 1.3 to graph 1, first 1.3 nohead dt 2 lc rgb '#c00000'
set label 'target 1.3' at graph 0.01, first 1.36 tc rgb '#c00000'
set bmargin 4
set key top right
plot 'record_bytes.dat' using 2:xtic(1) title 'before' lc rgb '#999999', \
     '' using 3 title 'after' lc rgb '#3060c0', \
     '' using 0:($3 + 0.06):(sprintf('%.2f', $3)) with labels offset 1.3,0 notitle
