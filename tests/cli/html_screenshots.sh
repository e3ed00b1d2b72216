# Instructor handouts and scenario reports in headless Chromium at 1280 px wide:
# `dtlab lesson --all --html DIR` writes each lesson's handout and an index linking
# them; Chromium lays each page out with no horizontal overflow, draws every plot
# (each has a non-empty path or bar, none says "no data"), gives PASS, an
# expected failure and an unexpected FAIL distinct classes and distinct colours, and
# takes a screenshot that is not blank. Bad --html paths are refused with exit 2.
. "$(dirname "$0")/lib.bash"

# Two lessons keep the test short; --all plays every lesson of --lessons-dir.
mkdir -p "$WORK/lessons"
cp "$DTLAB_SOURCE_DIR/lessons/loss-scaling.md" "$DTLAB_SOURCE_DIR/lessons/mean-metric-trap.md" "$WORK/lessons/"
expect_exit 0 all -- "$DTLAB" lesson --all --html "$WORK/handouts" --lessons-dir "$WORK/lessons" --threads 2
for file in index loss-scaling mean-metric-trap; do
  CHECKS=$((CHECKS + 1))
  [ -s "$WORK/handouts/$file.html" ] || fail "no $file.html in the handouts directory"
done
cp "$WORK/handouts/index.html" "$WORK/index.out"
expect_contains index out '<a href="loss-scaling.html">Loss scaling</a>'
expect_contains index out '<a href="mean-metric-trap.html">The Mean-metric trap</a>'
expect_contains all out "index.html (links to 2 handouts)"
# The handout's runs describe themselves with their own values: the 8-replica run
# of loss-scaling says "8 replicas, 8x", not the file's default 4.
cp "$WORK/handouts/loss-scaling.html" "$WORK/handout_text.out"
expect_contains handout_text out "8 replicas, 8x."
expect_contains handout_text out "4 replicas, 4x."
# Bad paths: a file where a directory belongs, a directory that cannot be made, --all without --html.
touch "$WORK/a-file"
expect_exit 2 all_into_file -- "$DTLAB" lesson --all --html "$WORK/a-file" --lessons-dir "$WORK/lessons"
expect_exit 2 all_no_parent -- "$DTLAB" lesson --all --html "$WORK/no/such/dir" --lessons-dir "$WORK/lessons"
expect_exit 2 all_without_html -- "$DTLAB" lesson --all --lessons-dir "$WORK/lessons"
expect_exit 2 all_with_name -- "$DTLAB" lesson loss-scaling --all --html "$WORK/h2" --lessons-dir "$WORK/lessons"
expect_exit 2 html_no_parent -- "$DTLAB" lesson loss-scaling --html "$WORK/no/such.html" --no-interactive
expect_exit 2 html_is_dir -- "$DTLAB" lesson loss-scaling --html "$WORK/handouts" --no-interactive
expect_contains html_no_parent err "--html"

# A scenario report with PASS and expected failures, and the demo page, whose FAIL
# is not expected.
expect_exit 0 report -- "$DTLAB" run short-final-batch --report "$WORK/report.html" --no-progress --threads 2
if [ -n "${HTML_REPORT_DEMO:-}" ] && [ -x "$HTML_REPORT_DEMO" ]; then
  expect_exit 0 demo -- "$HTML_REPORT_DEMO" "$WORK/demo.html"
fi

CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
  { echo "SKIP: no chromium on PATH (apt-get install chromium); $CHECKS file checks ran"; finish; }
export HOME="$WORK/home"
mkdir -p "$HOME"
HEADLESS=--headless=new
browse() {
  timeout 90 "$CHROMIUM" "$HEADLESS" --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$WORK/profile" \
    "$@" </dev/null
}
browse --window-size=1280,1000 --dump-dom "file://$WORK/report.html" >"$WORK/probe.out" 2>/dev/null
grep -q '<body' "$WORK/probe.out" || HEADLESS=--headless  # an older Chromium

# measure NAME PAGE: a copy of PAGE with a probe script that writes, after layout,
# the page's width, the plots drawn and not drawn, and each verdict class's colours
# into <body data-test-*>; Chromium's DOM dump is NAME.out, and a screenshot NAME.png.
measure() {
  local name=$1 page=$2 copy="$WORK/$1.probe.html"
  sed 's|</body>|<script>(function(){function m(){var b=document.body,drawn=0,blank=0,v={};\
document.querySelectorAll("svg.dtlab-plot").forEach(function(s){var ok=!/no data/.test(s.textContent);\
var marks=s.querySelectorAll("path,circle,rect");var any=false;marks.forEach(function(e){var r=e.getBoundingClientRect();\
if((e.tagName!="path"\|\|(e.getAttribute("d")\|\|"").length>4)\&\&r.width*r.height+r.width+r.height>0)any=true;});\
if(ok\&\&any)drawn++;else blank++;});\
document.querySelectorAll(".verdict").forEach(function(e){var c=getComputedStyle(e);v[e.className]=c.color+" on "+c.backgroundColor;});\
b.setAttribute("data-test-width",String(document.documentElement.scrollWidth));\
b.setAttribute("data-test-drawn",String(drawn));b.setAttribute("data-test-blank",String(blank));\
b.setAttribute("data-test-verdicts",JSON.stringify(v));}m();window.addEventListener("load",m);})();</script></body>|' \
    "$page" >"$copy"
  browse --window-size=1280,1000 --dump-dom "file://$copy" >"$WORK/$name.out" 2>"$WORK/$name.err"
  rm -f "$WORK/$name.png"
  browse --window-size=1280,2400 --screenshot="$WORK/$name.png" "file://$copy" >/dev/null 2>&1
}

# check NAME MIN_PLOTS: the measured page fits 1280 px, draws at least MIN_PLOTS plots
# and none blank, and its screenshot is far from blank (a blank page is ~1 KB).
check() {
  local name=$1 min=$2
  CHECKS=$((CHECKS + 1))
  python3 - "$WORK/$name.out" "$min" <<'PY' || fail "$name: see above"
import html, re, sys
dom = open(sys.argv[1]).read()
body = re.search(r"<body([^>]*)>", dom)
attrs = dict((k, html.unescape(v)) for k, v in re.findall(r'([\w-]+)="([^"]*)"', body.group(1) if body else ""))
width, drawn, blank = (int(attrs.get(k, -1)) for k in ("data-test-width", "data-test-drawn", "data-test-blank"))
problems = []
if width < 0: problems.append("the probe did not run")
if width > 1280: problems.append(f"the page is {width} px wide at a 1280 px window: it overflows")
if drawn < int(sys.argv[2]): problems.append(f"only {drawn} plots drawn")
if blank != 0: problems.append(f"{blank} plots without data or marks")
for p in problems: print(f"{sys.argv[1]}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
  CHECKS=$((CHECKS + 1))
  if [ ! -f "$WORK/$name.png" ]; then
    fail "$name: no screenshot"
  elif [ "$(stat -c %s "$WORK/$name.png")" -lt 20000 ]; then
    fail "$name: the screenshot is only $(stat -c %s "$WORK/$name.png") bytes: the page looks blank"
  fi
}

measure handout "$WORK/handouts/loss-scaling.html"
check handout 2
measure handout2 "$WORK/handouts/mean-metric-trap.html"
check handout2 1
measure index "$WORK/handouts/index.html"
check index 0
measure report "$WORK/report.html"
check report 6
[ -f "$WORK/demo.html" ] && measure demo "$WORK/demo.html"
# The report's verdicts: PASS and the expected failures have classes and colours of their own.
CHECKS=$((CHECKS + 1))
python3 - "$WORK/report.out" "$WORK/demo.out" <<'PY' || fail "verdict classes or colours are not distinct"
import html, json, os, re, sys
colours = {}
for path in sys.argv[1:]:
    if not os.path.exists(path): continue
    body = re.search(r'data-test-verdicts="([^"]*)"', open(path).read())
    colours.update(json.loads(html.unescape(body.group(1))) if body else {})
print("verdict classes and colours:", colours)
classes = {c for c in colours}
need = {"verdict ok", "verdict bad"}
expected_failure = [c for c in classes if c not in need]
if not need <= classes or not expected_failure:
    sys.exit(f"expected PASS, FAIL and expected-failure classes, got {sorted(classes)}")
if len({colours[c] for c in classes}) != len(classes):
    sys.exit(f"two verdict classes share their colours: {colours}")
PY
expect_contains report out 'class="verdict pitfall"'
echo "looked at: $WORK/handout.png, $WORK/handout2.png, $WORK/index.png, $WORK/report.png (1280 px wide)"
finish
