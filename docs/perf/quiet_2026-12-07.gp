# gnuplot quiet_2026-12-07.gp (from docs/perf): draws quiet_2026-12-07.png from quiet_2026-12-07.dat.
set terminal pngcairo size 860,400 font 'sans,10'
set output 'quiet_2026-12-07.png'
set title "Time per call against the bare twin, before and after, quiet machine (load average 0.0-1.4)\nscripts/bench, Release, mean of two rounds of 3 interleaved repetitions"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:4.2]
set ylabel 'guard time / bare twin time'
set grid ytics
set xtics rotate by -25
set arrow from graph 0, first 1.3 to graph 1, first 1.3 nohead dt 2 lc rgb '#c00000'
set arrow from graph 0, first 1.11 to graph 1, first 1.11 nohead dt 3 lc rgb '#208020'
set label 'red dashes: target 1.3' at graph 0.35, graph 0.92 tc rgb '#c00000'
set label 'green dots: SQLite target 1.11 (speed 0.9)' at graph 0.35, graph 0.85 tc rgb '#208020'
set bmargin 6
set key top right
plot 'quiet_2026-12-07.dat' using 2:xtic(1) title 'before' lc rgb '#999999', \
     '' using 3 title 'after' lc rgb '#3060c0', \
     '' using 0:($3 + 0.12):(sprintf('%.2f', $3)) with labels offset 1.3,0 notitle
