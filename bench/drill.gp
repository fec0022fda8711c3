# gnuplot drill.gp (in this directory) redraws drill.png from drill.dat
set terminal pngcairo size 1100,860 font ',10'
set output 'drill.png'
set multiplot layout 3,1 title 'Fault drill: requests reaching the provider per 100 ms (N=1100, 64 workers, limit 6000/min; thin: per 100 ms, thick: 1 s mean; dashed black: 2xx answers, 1 s mean)'
set grid ytics
set key top right opaque box
set xrange [0:102.2]
set yrange [0:14]
set ylabel 'requests / 100 ms'
set object 1 rect from 20,graph 0 to 50,graph 1 fc rgb '#f4cccc' fs solid 0.5 noborder behind
set object 2 rect from 60,graph 0 to 70,graph 1 fc rgb '#fff2cc' fs solid 0.5 noborder behind
set label 1 'outage' at 35.0,graph 0.9 center
set label 2 'slow' at 65.0,graph 0.9 center
plot 'drill.dat' using 1:2 with lines lw 0.8 lc rgb '#7b3294' notitle, '' using 1:3 with lines lw 2.5 lc rgb '#7b3294' title 'curl, naive 1 s loop: requests', '' using 1:9 with lines lw 1.8 dt 2 lc rgb '#000000' title '2xx answers'
plot 'drill.dat' using 1:4 with lines lw 0.8 lc rgb '#1b9e77' notitle, '' using 1:5 with lines lw 2.5 lc rgb '#1b9e77' title 'curl --retry 3: requests', '' using 1:11 with lines lw 1.8 dt 2 lc rgb '#000000' title '2xx answers'
set xlabel 't, s (batch start = 0)'
plot 'drill.dat' using 1:6 with lines lw 0.8 lc rgb '#2c7bb6' notitle, '' using 1:7 with lines lw 2.5 lc rgb '#2c7bb6' title 'curl + guard: requests', '' using 1:13 with lines lw 1.8 dt 2 lc rgb '#000000' title '2xx answers'
unset multiplot
