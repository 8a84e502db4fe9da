# Trial 5's seeds: the baseline and candidate builds alternating on one paged int8 case under
# measure.seed 1-5, three times over; prints "binary seed repeat median_ms min_ms" per run.
#   BASELINE=<17642e6-equivalent build> CANDIDATE=<that + paged-scales-prefetch.patch> \
#       bash results/decode-kernel-trials-ab/paged-scales-seeds/seeds.sh
here=results/decode-kernel-trials-ab
for rep in 1 2 3; do for seed in 1 2 3 4 5; do for b in DISPATCH SCALEPF2; do
  if [ "$b" = DISPATCH ]; then bin=$BASELINE; else bin=$CANDIDATE; fi
  out=$here/paged-scales-seeds/runs/$b-s$seed-r$rep
  "$bin" run $here/int8-paged-seed.toml --set measure.seed=$seed --out "$out" > /dev/null 2>&1
  python3 -c "import json,sys; c = json.loads(open(sys.argv[1]).readline()); print('$b', $seed, $rep, round(c['time_ms_median'], 3), round(c['time_ms_min'], 3))" "$out/cases.jsonl"
done; done; done
