// tprof's profile viewer: an icicle graph with zoom and search, per-process timelines (from
// event logs) and per-process tables, drawn from the JSON in #tprof-data. Written for tprof;
// it loads nothing. Text from the profile only ever reaches the page through textContent,
// attribute values and text drawn on a canvas.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('tprof-data').textContent);
  const $ = (id) => document.getElementById(id);
  // The data comes as arrays (see the html export's documentation): named here once.
  const PATHS = data.paths;
  data.processes = data.processes.map((p) => ({
    id: p[0], label: p[1] === null ? p[0] : p[1], name: p[2], initial_call: data.initial_calls[p[3]], run: p[4],
    count: p.length > 5 ? p[5] : 1,
  }));
  // How many processes the profile has: a page of many sums those past its largest into rows
  // that each stand for many.
  const ALL = data.processes.reduce((n, p) => n + p.count, 0);
  const procs = (n) => int(n) + ' process' + (n === 1 ? '' : 'es');
  data.stacks = data.stacks.map((s) => ({ process: s[0], path: s[1], calls: s[2], value: s[3], bytes: s[4], blocks: s[5] }));
  data.rows = data.rows.map((r) => ({
    process: r[0], function: r[1], calls: r[2], value: r[3], words: r[4], bytes: r[5], blocks: r[6], total: r.length > 7 ? r[7] : 0,
  }));
  data.percentiles = data.percentiles.map((q) => ({
    process: q[0], function: q[1], calls: q[2], p50_ns: q[3], p90_ns: q[4], p99_ns: q[5], max_ns: q[6],
  }));
  // Past this many processes, the view of every process sums them by registered name or by
  // initial call (or shows them a page at a time), rather than a table for each.
  const MANY = 50;
  const PAGE = 200;      // rows of a table drawn at a time
  const MENU = 200;      // processes in the menu at most (the largest); the table has every one
  const TL_SHOWN = 20;   // timelines drawn at most in the view of every process
  let grouping = ALL > MANY ? 'initial_call' : 'process';
  // A sampled profile: values are nanoseconds of sampled time (bytes for allocation samples:
  // data.unit says which), and 'calls' count samples.
  const SAMPLED = !!data.samples;
  const BYTES = SAMPLED && data.unit === 'bytes';
  const TIME = data.trace_type === 'call_time' || (SAMPLED && !BYTES);
  const MEMORY = data.trace_type === 'call_memory' && !SAMPLED;
  // Percentiles of each process's functions (their own time per call), by 'process:function'.
  const PCT = new Map(data.percentiles.map((q) => [q.process + ':' + q.function, q]));
  const PCT_COLS = ['p50', 'p90', 'p99', 'max'];
  const ROW = 20;        // px per graph row
  const MIN_PX = 0.35;   // frames narrower than this are not drawn
  const LABEL_PX = 28;   // frames narrower than this get no text

  const KIND = {
    call_count: 'calls per function, every process together',
    call_time: 'time per function, counted while its process is polled',
    call_memory: 'memory allocated per function: words, bytes and blocks',
  };
  const FACT = { call_count: 'count', call_time: 'time', call_memory: 'allocated' };
  const WHAT = SAMPLED ? data.samples.what + ': ' + data.samples.measure + ', per stack' : KIND[data.trace_type];
  const MEASURED = SAMPLED ? (BYTES ? 'allocated' : 'time') : FACT[data.trace_type];
  // the unit of a value column's title: ' (us)' for times shown in microseconds
  const COL_UNIT = TIME ? ' (us)' : BYTES ? ' (bytes)' : '';
  const COUNTED = SAMPLED ? 'samples' : 'calls';
  // Where a function is, 'file:line', or '' when unknown (native frames without debug info).
  function where(f) {
    return f.file ? f.file + ':' + f.line : '';
  }

  // ---- formatting
  function int(n) {
    return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  function fixed(n, digits) {
    const s = n.toFixed(digits);
    const dot = s.indexOf('.');
    return dot < 0 ? int(Number(s)) : int(Math.trunc(Number(s))) + s.slice(dot);
  }
  function dur(ns) {
    if (ns >= 1e9) return fixed(ns / 1e9, 3) + ' s';
    if (ns >= 1e6) return fixed(ns / 1e6, 3) + ' ms';
    if (ns >= 1e3) return fixed(ns / 1e3, 3) + ' µs';
    return int(ns) + ' ns';
  }
  function value(v) {
    return TIME ? dur(v) : int(v) + ' ' + data.unit;
  }
  function percent(part, whole) {
    if (!(whole > 0)) return '0%';
    const p = (100 * part) / whole;
    return (p >= 10 || p === 0 ? p.toFixed(1) : p.toFixed(2)) + '%';
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }

  // ---- colours: a warm hue per function (the standard library's in green), from its name
  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }
  const colours = new Map();
  function colour(fn) {
    let c = colours.get(fn);
    if (c === undefined) {
      const f = data.functions[fn];
      const std = /^(std|core|alloc)(::|$)/.test(f.module);
      const h = hash(f.mfa);
      const hue = std ? 80 + (h % 30) : h % 48;
      const sat = 62 + ((h >>> 8) % 24);
      const light = 58 + ((h >>> 16) % 14);
      c = 'hsl(' + hue + ' ' + sat + '% ' + light + '%)';
      colours.set(fn, c);
    }
    return c;
  }

  // ---- the tree: root, then processes, then the call paths
  let nodes = [];
  let root = null;
  let zoom = null;
  let process = -1; // -1: every process
  let term = '';
  let merged = []; // the frames drawn for many narrow ones: node -1 - i

  function node(kind, name, fn, proc, parent) {
    const n = {
      id: nodes.length, kind, name, fn, proc, parent, children: new Map(), list: [],
      depth: parent ? parent.depth + 1 : 0, self: 0, total: 0, calls: 0, bytes: 0, blocks: 0,
      match: false, byPath: new Map(),
    };
    nodes.push(n);
    return n;
  }
  function child(parent, key, make) {
    let c = parent.children.get(key);
    if (!c) {
      c = make();
      parent.children.set(key, c);
    }
    return c;
  }
  // The key a process is summed by, and how it reads.
  // How many processes a group's members stand for.
  function members(n) {
    let sum = 0;
    for (const p of n.members) sum += data.processes[p].count;
    return sum;
  }
  function groupKey(p) {
    return grouping === 'name' ? data.processes[p].name : data.processes[p].initial_call;
  }
  function groupName(key) {
    if (grouping === 'name') return key === null || key === undefined ? '(no registered name)' : key;
    return key ? key : '(no initial call)';
  }
  // ---- filters of sampled profiles (pprof's focus and hide, and the plumbing folded as
  // `tprof report` folds it): which functions are left out of the paths (their time counted
  // at the frame above), and which paths' samples are kept.
  const PLUMBING = SAMPLED ? data.functions.reduce((n, f) => n + (f.plumbing ? 1 : 0), 0) : 0;
  const filters = { focus: null, hide: null, plumbing: PLUMBING > 0 };
  let hiddenFn = null; // per function, whether it is left out (null: none is)
  let focusedPath = null; // per path, whether a frame on it matches focus (null: no focus)
  function filterMatch(re, f) {
    return re.test(f.mfa) || (f.file !== '' && re.test(f.file));
  }
  function prepareFilters() {
    hiddenFn = null;
    focusedPath = null;
    if (filters.plumbing || filters.hide) {
      hiddenFn = data.functions.map((f) => (filters.plumbing && !!f.plumbing) || (!!filters.hide && filterMatch(filters.hide, f)));
    }
    if (filters.focus) {
      const hit = data.functions.map((f) => filterMatch(filters.focus, f));
      focusedPath = new Uint8Array(PATHS.length);
      for (let p = 0; p < PATHS.length; p++) {
        const parent = PATHS[p][0];
        focusedPath[p] = hit[PATHS[p][1]] || (parent >= 0 && focusedPath[parent]) ? 1 : 0;
      }
    }
  }
  // Whether a stack's samples are kept by the focus.
  function kept(s) {
    return !focusedPath || (s.path >= 0 && focusedPath[s.path] === 1);
  }
  // The tables' rows as the filters show the samples (see prepareFilters): per process and
  // function, the samples with it on their stack (calls, and their value: total, counted once
  // per sample however often it recurs) and those whose innermost shown frame it is (value).
  // Without a filter, the rows the page came with. Linear in the stacks' frames.
  function shownRows() {
    if (!SAMPLED || (!hiddenFn && !focusedPath)) return data.rows;
    const byKey = new Map();
    const seen = new Int32Array(data.functions.length).fill(-1);
    data.stacks.forEach((s, i) => {
      if (s.path < 0 || !kept(s)) return;
      let innermost = true;
      for (let at = s.path; at >= 0; at = PATHS[at][0]) {
        const f = PATHS[at][1];
        if (hiddenFn && hiddenFn[f]) continue;
        const key = s.process + ':' + f;
        let r = byKey.get(key);
        if (!r) {
          r = { process: s.process, function: f, calls: 0, value: 0, words: 0, bytes: 0, blocks: 0, total: 0 };
          byKey.set(key, r);
        }
        if (innermost) r.value += s.value;
        innermost = false;
        if (seen[f] !== i) {
          seen[f] = i;
          r.calls += s.calls;
          r.total += s.value;
        }
      }
    });
    return Array.from(byKey.values()).sort((a, b) => a.process - b.process || a.function - b.function);
  }
  // The total of the samples the focus keeps.
  function shownTotal() {
    if (!focusedPath) return data.total;
    let sum = 0;
    for (const s of data.stacks) if (kept(s)) sum += s.value;
    return sum;
  }
  // A pattern as `tprof report` reads it (Rust's regular expressions) made JavaScript's: a
  // leading flags group, `(?i)` (with m and s), becomes the expression's flags, `(?P<name>`
  // is `(?<name>`, `\A` and `\z` (the text's start and end) are `^` and `$`, `\a` is `\x07`.
  // Unicode classes (`\p{L}`, `\pL`, `\P{Greek}`, `\p{^L}`) and `\x{HHHH}` need JavaScript's
  // `u` flag, which the expression then gets; a bare script name (`\p{Greek}`, Rust's
  // script-extensions class) is `\p{scx=Greek}`. Under `u`, JavaScript refuses an escaped
  // character that is not a syntax one (Rust's `\#`, `\-`, `\:`): those become `\xHH`, in
  // every pattern. A form that cannot be translated (`(?x)`, flags past the start, Rust's word
  // boundaries `\<`, `\>`, `\b{...}`, class set operations (`[\p{L}&&\p{Greek}]`), a class
  // name JavaScript does not know, or a form the `u` flag makes JavaScript refuse, such as a
  // lone `]`) throws a RangeError saying which; one neither reads, a SyntaxError.
  function rustRegex(text) {
    let source = text;
    let flags = '';
    const lead = /^\(\?([a-zA-Z]+)\)/.exec(source);
    if (lead) {
      for (const f of lead[1]) {
        if (!'ims'.includes(f)) throw new RangeError('its flag `' + f + '` has no JavaScript equivalent');
        if (!flags.includes(f)) flags += f;
      }
      source = source.slice(lead[0].length);
    }
    let unicode = false;
    let out = '';
    for (let i = 0; i < source.length; i++) {
      if (source[i] === '\\' && i + 1 < source.length) {
        const next = source[i + 1];
        if ((next === 'A' || next === 'z') && flags.includes('m')) {
          throw new RangeError('`\\' + next + '` in multi-line mode has no JavaScript equivalent');
        }
        if (next === '<' || next === '>' || source.startsWith('b{', i + 1)) {
          throw new RangeError('the word boundary `\\' + (next === 'b' ? 'b{' : next) + '` has no JavaScript equivalent');
        }
        if (next === 'p' || next === 'P') {
          const braced = source[i + 2] === '{';
          const end = braced ? source.indexOf('}', i + 3) : i + 2;
          if (end < 0 || end >= source.length) throw new SyntaxError('an unfinished class');
          const name = braced ? source.slice(i + 3, end) : source[end];
          out += unicodeClass(next, name, source.slice(i, end + 1));
          unicode = true;
          i = end;
          continue;
        }
        if (next === 'x' && source[i + 2] === '{') {
          const end = source.indexOf('}', i + 3);
          if (end < 0) throw new SyntaxError('an unfinished escape');
          out += '\\u' + source.slice(i + 2, end + 1);
          unicode = true;
          i = end;
          continue;
        }
        if (next === 'A') out += '^';
        else if (next === 'z') out += '$';
        else if (next === 'a') out += '\\x07';
        // Punctuation JavaScript's `u` flag refuses escaped: as its code.
        else if (/[!-\/:-@\[-`{-~]/.test(next) && !'^$\\.*+?()[]{}|/'.includes(next)) {
          out += '\\x' + next.charCodeAt(0).toString(16).padStart(2, '0');
        } else out += '\\' + next;
        i++;
      } else if (source.startsWith('(?P<', i)) {
        out += '(?<';
        i += 3;
      } else {
        out += source[i];
      }
    }
    if (/\(\?[a-zA-Z-]+[:)]/.test(out.replace(/\\./g, ''))) {
      throw new RangeError('flags are translated only as a group at its start, `(?i)...`');
    }
    if (/\[[^\]]*(&&|--|~~)/.test(source.replace(/\\./g, ''))) {
      throw new RangeError('class set operations (`&&`, `--`, `~~`) have no JavaScript equivalent');
    }
    if (!unicode) return new RegExp(out, flags);
    try {
      return new RegExp(out, flags + 'u');
    } catch (e) {
      // Rust reads it; JavaScript's `u` flag, which its classes need, does not.
      throw new RangeError('its Unicode classes need JavaScript\'s `u` flag, under which ' + e.message);
    }
  }
  // Rust's Unicode class `written` (`\p` or `\P`, `p`, and the name in its braces) as
  // JavaScript writes it, or a RangeError naming it: `^` and `!=` negate, a name JavaScript
  // does not know as a property or category is tried as a script (`scx=`), as Rust reads it.
  function unicodeClass(p, name, written) {
    let negated = p === 'P';
    let body = name.trim();
    if (body.startsWith('^')) {
      negated = !negated;
      body = body.slice(1);
    }
    if (body.includes('!=')) {
      negated = !negated;
      body = body.replace('!=', '=');
    }
    body = body.replace(/[:]/, '=');
    for (const candidate of [body, 'scx=' + body]) {
      try {
        new RegExp('\\p{' + candidate + '}', 'u');
        return (negated ? '\\P{' : '\\p{') + candidate + '}';
      } catch (e) {
        // Not a name JavaScript reads: the next candidate.
      }
    }
    throw new RangeError('the class `' + written + '` has no JavaScript equivalent (JavaScript reads property, category and script names as Unicode spells them: `\\p{L}`, `\\p{Lu}`, `\\p{Greek}`)');
  }
  // Reads the filter boxes (and the checkbox); a box that is not a regular expression, or
  // one JavaScript cannot read (see rustRegex), says so and filters nothing.
  function readFilters() {
    const errors = [];
    const regex = (id) => {
      const text = $(id).value;
      if (!text) return null;
      try {
        return rustRegex(text);
      } catch (e) {
        errors.push(id + ' `' + text + '` ' + (e instanceof RangeError
          ? 'cannot be read here (' + e.message + '): it filters nothing in this page; `tprof report` reads it'
          : 'is not a regular expression'));
        return null;
      }
    };
    filters.focus = regex('focus');
    filters.hide = regex('hide');
    filters.plumbing = $('plumbing').checked;
    const said = [];
    if (filters.plumbing && PLUMBING > 0) {
      said.push(int(PLUMBING) + ' plumbing frame' + (PLUMBING === 1 ? '' : 's') + ' folded (the runtime, tokio, std, system libraries)');
    }
    $('filtered').textContent = errors.concat(said).join('; ');
    $('filtered').classList.toggle('error', errors.length > 0);
  }
  // The filters a link asks for: #focus=REGEX&hide=REGEX&plumbing=0.
  function filtersFromLink() {
    const asked = new URLSearchParams(window.location.hash.replace(/^#/, ''));
    if (asked.has('focus')) $('focus').value = asked.get('focus');
    if (asked.has('hide')) $('hide').value = asked.get('hide');
    if (asked.has('plumbing')) $('plumbing').checked = asked.get('plumbing') !== '0';
  }
  // The node of call path `path` under `base` (made on first use; a path's parent is listed
  // before it, so each is walked once per base); a function the filters leave out adds no
  // node: the path's node is its parent's.
  function nodeOf(base, path, proc) {
    const chain = [];
    let at = path;
    let n = null;
    while (at >= 0) {
      n = base.byPath.get(at);
      if (n) break;
      chain.push(at);
      at = PATHS[at][0];
    }
    if (at < 0) n = base;
    for (let i = chain.length - 1; i >= 0; i--) {
      const f = PATHS[chain[i]][1];
      if (!hiddenFn || !hiddenFn[f]) {
        const parent = n;
        n = child(parent, f, () => node('fn', data.functions[f].mfa, f, proc, parent));
      }
      base.byPath.set(chain[i], n);
    }
    return n;
  }
  function build() {
    nodes = [];
    if (process >= 0) {
      root = node('process', data.processes[process].label, -1, process, null);
    } else {
      root = node('root', 'all', -1, -1, null);
    }
    const grouped = process < 0 && grouping !== 'process';
    prepareFilters();
    for (const s of data.stacks) {
      if (process >= 0 && s.process !== process) continue;
      if (focusedPath && (s.path < 0 || !focusedPath[s.path])) continue;
      let base = root;
      if (grouped) {
        const key = groupKey(s.process);
        base = child(root, 'g' + key, () => {
          const g = node('group', groupName(key), -1, -1, root);
          g.members = new Set();
          return g;
        });
        base.members.add(s.process);
      } else if (process < 0) {
        const p = s.process;
        base = child(root, 'p' + p, () => node('process', data.processes[p].label, -1, p, root));
      }
      const n = nodeOf(base, s.path, grouped ? -1 : s.process);
      n.self += s.value;
      n.calls += s.calls;
      n.bytes += s.bytes;
      n.blocks += s.blocks;
    }
    // totals, children largest first (nodes come after their parent: walk backwards)
    for (let i = nodes.length - 1; i >= 0; i--) {
      const n = nodes[i];
      n.list = Array.from(n.children.values());
      n.list.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      n.total = n.self + n.list.reduce((sum, c) => sum + c.total, 0);
    }
    zoom = root;
  }

  // ---- search
  function applySearch() {
    const box = $('graph');
    let matched = 0;
    let count = 0;
    for (const n of nodes) {
      n.match = false;
    }
    if (term) {
      for (const n of nodes) {
        if (n.kind === 'root') continue;
        const f = n.fn >= 0 ? data.functions[n.fn] : null;
        const text = (n.name + ' ' + (f ? f.file : n.proc >= 0 ? data.processes[n.proc].id : '')).toLowerCase();
        if (text.includes(term)) {
          n.match = true;
          count++;
          let covered = false;
          for (let a = n.parent; a; a = a.parent) {
            if (a.match) { covered = true; break; }
          }
          // nodes come after their ancestors, so an ancestor's match is already known
          if (!covered) matched += n.total;
        }
      }
    }
    box.classList.toggle('searching', term !== '');
    $('matched').textContent = term
      ? count === 0
        ? 'no match'
        : count + (count === 1 ? ' frame matches: ' : ' frames match: ') + percent(matched, root.total) +
          ' of the total (' + value(matched) + ')'
      : '';
    $('matched').dataset.share = term ? String(root.total > 0 ? matched / root.total : 0) : '';
  }

  // ---- drawing
  function label(n) {
    if (n.kind === 'root') return 'all (' + procs(ALL) + ')';
    if (n.kind === 'process') {
      const p = data.processes[n.proc];
      return p.label.endsWith(p.id) || p.id === 'all' ? p.label : p.label + ' ' + p.id;
    }
    if (n.kind === 'group') return n.name + ' (' + procs(members(n)) + ')';
    if (n.kind === 'merged') return int(n.count) + ' frames narrower than a pixel';
    return n.name;
  }
  function render() {
    const box = $('graph');
    const width = box.clientWidth;
    box.textContent = '';
    $('zoom-out').disabled = zoom === root;
    $('reset').disabled = zoom === root;
    $('zoomed').textContent = zoom === root ? '' : 'Zoomed into ' + label(zoom) + ' (' + percent(zoom.total, root.total) + ')';
    if (root.total === 0) {
      const none = SAMPLED ? 'No sample was taken.' : 'Trace is empty: no function was called.';
      const filtered = focusedPath !== null && data.stacks.length > 0;
      box.append(el('div', {
        class: 'empty',
        text: data.stacks.length === 0 ? none : filtered ? 'No sample has a frame the focus matches.' : 'Nothing was measured: every value is 0.',
      }));
      box.style.height = '';
      detail(null);
      return;
    }
    const frag = document.createDocumentFragment();
    let deepest = 0;
    const place = (n, x, w, ancestor) => {
      deepest = Math.max(deepest, n.depth);
      const classes = ['frame', n.kind];
      if (ancestor) classes.push('ancestor');
      if (n.match) classes.push('match');
      if (w < LABEL_PX) classes.push('narrow');
      const e = el('div', {
        class: classes.join(' '), 'data-node': n.id, role: 'treeitem', 'aria-label': n.name,
        text: w < LABEL_PX ? '' : label(n),
      });
      e.style.left = x + 'px';
      e.style.width = Math.max(w - 1, 0.5) + 'px';
      e.style.top = n.depth * ROW + 'px';
      if (n.kind === 'fn') e.style.setProperty('--c', colour(n.fn));
      frag.append(e);
    };
    for (let a = zoom.parent; a; a = a.parent) place(a, 0, width, true);
    merged = [];
    // Frames narrower than a pixel are merged into one (children come largest first, so the
    // narrow ones are the last), as inferno's --minwidth does: each row holds at most a frame
    // per pixel.
    const layout = (n, x, w) => {
      place(n, x, w, false);
      let cx = x;
      let narrow = null;
      for (const c of n.list) {
        const cw = n.total > 0 ? (w * c.total) / n.total : 0;
        if (cw >= 1) layout(c, cx, cw);
        else if (narrow) {
          narrow.count++;
          narrow.total += c.total;
          narrow.w += cw;
        } else {
          narrow = { id: -1 - merged.length, kind: 'merged', name: '', fn: -1, proc: -1, parent: n, depth: n.depth + 1,
            count: 1, total: c.total, self: 0, list: [], x: cx, w: cw, match: false };
        }
        cx += cw;
      }
      if (narrow && narrow.w >= MIN_PX) {
        merged.push(narrow);
        place(narrow, narrow.x, narrow.w, false);
      }
    };
    layout(zoom, 0, width);
    box.style.height = (deepest + 1) * ROW + 'px';
    box.append(frag);
    detail(null);
  }

  // ---- details of a frame: the tooltip and the line under the graph
  function facts(n) {
    const rows = [];
    const f = n.fn >= 0 ? data.functions[n.fn] : null;
    if (f) {
      if (where(f)) rows.push(['file', where(f)]);
      if (n.proc >= 0 && (process < 0 || data.processes.length > 1)) rows.push(['process', label({ kind: 'process', proc: n.proc })]);
      rows.push([COUNTED, int(n.calls) + (data.call_tree ? ' on this path' : '')]);
    } else if (n.kind === 'process') {
      const p = data.processes[n.proc];
      if (p.initial_call) rows.push(['initial call', p.initial_call]);
      if (p.run !== null && p.run !== undefined && data.runs.length > 1) rows.push(['run', String(p.run)]);
    } else if (n.kind === 'group') {
      rows.push(['processes', int(members(n)) + ', by ' + (grouping === 'name' ? 'registered name' : 'initial call')]);
    } else if (n.kind === 'merged') {
      rows.push(['under', label(n.parent) + ' (click to zoom into it)']);
    }
    rows.push([MEASURED, value(n.total) + (f && n.list.length ? ' with callees' : '')]);
    if (f && n.list.length) rows.push(['own', value(n.self)]);
    if (MEMORY && f) {
      rows.push(['allocations', int(n.blocks) + ' block' + (n.blocks === 1 ? '' : 's') + ' of its own']);
    }
    rows.push(['share', percent(n.total, root.total) + ' of the total' +
      (zoom !== root && zoom !== n && isUnder(n, zoom) ? ', ' + percent(n.total, zoom.total) + ' of the zoomed frame' : '')]);
    return rows;
  }
  function isUnder(n, a) {
    for (let x = n; x; x = x.parent) if (x === a) return true;
    return false;
  }
  function detail(n) {
    const d = $('detail');
    d.textContent = '';
    const shown = n || zoom;
    if (!shown || root.total === 0) return;
    d.append(el('b', { text: label(shown) }));
    for (const [k, v] of facts(shown)) d.append('  ·  ' + k + ' ' + v);
    if (!n) d.append('  ·  click a frame to zoom in' + (LISTINGS.size ? ' (and see its source)' : ''));
  }
  function tooltip(n, ev) {
    if (!n) {
      $('tooltip').hidden = true;
      return;
    }
    showTip(label(n), facts(n), ev);
  }
  function showTip(name, rows, ev) {
    const t = $('tooltip');
    t.textContent = '';
    t.append(el('div', { class: 'name', text: name }));
    const table = el('table');
    for (const [k, v] of rows) table.append(el('tr', {}, el('td', { text: k }), el('td', { class: 'num', text: v })));
    t.append(table);
    t.hidden = false;
    const pad = 14;
    const r = t.getBoundingClientRect();
    let x = ev.clientX + pad;
    let y = ev.clientY + pad;
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, ev.clientX - r.width - pad);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, ev.clientY - r.height - pad);
    t.style.left = x + 'px';
    t.style.top = y + 'px';
  }
  function frameAt(ev) {
    const e = ev.target.closest ? ev.target.closest('.frame') : null;
    if (!e) return null;
    const id = Number(e.dataset.node);
    return id >= 0 ? nodes[id] : merged[-1 - id] || null;
  }

  // ---- timelines: each process's event log, its frames at the times they ran.
  // A frame is [function, start_ns, end_ns, depth, cut_short].
  const TL_ROW = 14;   // px per timeline row
  const TL_ROWS = 32;  // rows at most: deeper frames are drawn on the last one
  const span = data.timelines.reduce((m, t) => t.frames.reduce((mm, f) => Math.max(mm, f[2]), m), 0);
  // per timeline, its frames by row, each list in start order (for finding the one hovered)
  const byRow = data.timelines.map((t) => {
    const rows = [];
    for (const f of t.frames) {
      const r = Math.min(f[3], TL_ROWS - 1);
      (rows[r] = rows[r] || []).push(f);
    }
    return rows;
  });
  function matches(fn) {
    if (!term) return false;
    const f = data.functions[fn];
    return (f.mfa + ' ' + f.file).toLowerCase().includes(term);
  }
  function timelines() {
    const box = $('timeline-box');
    box.textContent = '';
    box.hidden = data.timelines.length === 0;
    if (box.hidden) return;
    box.append(el('h2', { text: 'Timeline' }),
      el('p', { class: 'sub', text: 'Each traced call, or poll of an async call, at the time it ran, from the event log of its process: ' +
        'time from the first event logged (' + dur(span) + ' in all). Hover a frame for its details.' }));
    let shown = [];
    data.timelines.forEach((t, i) => {
      if (process < 0 || t.process === process) shown.push(i);
    });
    if (!shown.length) {
      box.append(el('p', { class: 'empty', text: 'This process has no event log.' }));
      return;
    }
    if (shown.length > TL_SHOWN) {
      box.append(el('p', { class: 'empty', text: 'The first ' + TL_SHOWN + ' of ' + int(shown.length) +
        ' processes with an event log: choose a process for its own.' }));
      shown = shown.slice(0, TL_SHOWN);
    }
    const matchColour = getComputedStyle(document.documentElement).getPropertyValue('--match').trim() || '#d13fd8';
    for (const i of shown) {
      const t = data.timelines[i];
      const n = t.frames.length;
      const head = el('h3', {}, label({ kind: 'process', proc: t.process }),
        el('span', { class: 'sub', text: ' — ' + int(n) + ' frame' + (n === 1 ? '' : 's') +
          (t.dropped > 0 ? ' — its log is full: ' + int(t.dropped) + ' later event' + (t.dropped === 1 ? '' : 's') + ' not kept' : '') }));
      const canvas = el('canvas', { class: 'timeline', 'data-timeline': String(i), role: 'img',
        'aria-label': 'Timeline of ' + label({ kind: 'process', proc: t.process }) });
      box.append(el('section', { 'data-process': data.processes[t.process].id }, head, canvas));
      const rows = Math.min(TL_ROWS, t.frames.reduce((m, f) => Math.max(m, f[3] + 1), 1));
      const width = canvas.clientWidth || box.clientWidth || 600;
      const ratio = window.devicePixelRatio || 1;
      canvas.width = Math.max(1, Math.round(width * ratio));
      canvas.height = Math.max(1, Math.round(rows * TL_ROW * ratio));
      canvas.style.height = rows * TL_ROW + 2 * canvas.clientTop + 'px';
      const ctx = canvas.getContext('2d');
      if (!ctx) continue;
      ctx.scale(ratio, ratio);
      ctx.font = '11px ' + getComputedStyle(document.body).getPropertyValue('--mono');
      ctx.textBaseline = 'middle';
      const scale = span > 0 ? width / span : 0;
      for (const f of t.frames) {
        const x = f[1] * scale;
        const w = Math.max((f[2] - f[1]) * scale, 1);
        const y = Math.min(f[3], rows - 1) * TL_ROW;
        const hit = matches(f[0]);
        ctx.globalAlpha = term && !hit ? 0.35 : 1;
        ctx.fillStyle = hit ? matchColour : colour(f[0]);
        ctx.fillRect(x, y, w, TL_ROW - 1);
        if (w >= 40) {
          const name = data.functions[f[0]].mfa;
          const fits = Math.floor((w - 6) / 6.6);
          ctx.fillStyle = hit ? '#fff' : '#1a1a1a';
          ctx.fillText(name.length > fits ? name.slice(0, Math.max(fits - 1, 1)) + '…' : name, x + 3, y + TL_ROW / 2, w - 4);
        }
      }
      ctx.globalAlpha = 1;
    }
    box.append(el('div', { class: 'axis' }, el('span', { text: '0' }), el('span', { text: dur(span) })));
  }
  function timelineFrame(ev) {
    const canvas = ev.target.closest ? ev.target.closest('canvas.timeline') : null;
    if (!canvas) return null;
    const i = Number(canvas.dataset.timeline);
    const t = data.timelines[i];
    const r = canvas.getBoundingClientRect();
    const width = canvas.clientWidth;
    if (!t || !(width > 0) || !(span > 0)) return null;
    const row = byRow[i][Math.floor((ev.clientY - r.top - canvas.clientTop) / TL_ROW)] || [];
    const ns = ((ev.clientX - r.left - canvas.clientLeft) / width) * span;
    const slack = (2 / width) * span; // two pixels
    // the last frame that starts by then, or one before it (nested ones share the last row)
    let lo = 0;
    let hi = row.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (row[mid][1] <= ns + slack) lo = mid + 1;
      else hi = mid;
    }
    for (let k = lo - 1; k >= 0 && k >= lo - 64; k--) {
      if (row[k][2] + slack >= ns) return { t, f: row[k] };
    }
    return null;
  }
  function timelineTip(hit, ev) {
    if (!hit) {
      $('tooltip').hidden = true;
      return;
    }
    const { t, f } = hit;
    const fn = data.functions[f[0]];
    const rows = [['file', fn.file + ':' + fn.line]];
    if (data.timelines.length > 1) rows.push(['process', label({ kind: 'process', proc: t.process })]);
    rows.push(['start', dur(f[1]) + ' after the first event'], ['duration', dur(f[2] - f[1])], ['depth', String(f[3])]);
    if (f[4]) rows.push(['cut short', 'still running where the log ends']);
    showTip(fn.mfa, rows, ev);
  }

  // ---- source listings (sampled profiles): a function's lines, each with its flat and cum
  // values, as pprof -list shows them
  const LISTINGS = new Map(((data.listings && data.listings.routines) || []).map((r) => [r.entry, r]));
  function listValue(v, unit) {
    if (!v) return '.';
    if (unit === 'nanoseconds') return dur(v);
    if (unit === 'bytes') return int(v) + ' B';
    return int(v);
  }
  function showListing(fn) {
    const box = $('listing-box');
    const r = LISTINGS.get(fn);
    box.textContent = '';
    box.hidden = !r;
    if (!r) return;
    const cols = data.listings.columns;
    const total = data.listings.totals[0] || 0;
    const close = el('button', { type: 'button', class: 'close', title: 'Close the listing', text: '\u00d7' });
    close.addEventListener('click', () => { box.hidden = true; });
    box.append(el('h2', {}, 'Source of ', el('span', { class: 'fn', text: data.functions[fn].mfa }), close));
    const amount = (v, unit) => (v ? listValue(v, unit) : '0');
    const sums = cols.map((c, i) => c.name + ': flat ' + amount(r.flat[i], c.unit) + ', cum ' + amount(r.cum[i], c.unit)).join('; ');
    box.append(el('p', { class: 'sub', text: (r.file || 'no source file') + ' — ' + data.listings.sampler + ' samples — ' +
      sums + ' (' + percent(r.cum[0] || 0, total) + ' of the total). flat: where the samples ended; cum: where their stacks passed.' }));
    if (r.source.state === 'missing') {
      box.append(el('p', { class: 'note', text: 'Source not found: ' + r.file + ': ' + r.source.reason + '; the figures are given by line number.' }));
    }
    if (r.at_definition) {
      const [line, values] = r.at_definition;
      box.append(el('p', { class: 'note', text: listValue(values[0], cols[0].unit) + ' of it came with no line of its own: shown on line ' + line + ', where it is defined.' }));
    }
    const head = el('tr');
    for (const c of cols) {
      const suffix = cols.length > 1 ? ' ' + c.name : '';
      head.append(el('th', { text: 'flat' + suffix }), el('th', { text: 'cum' + suffix }));
    }
    head.append(el('th', { text: 'line' }), el('th', { class: 'code', text: 'source' }));
    const body = el('tbody');
    // each line: [line, flat, cum, text]
    const top = r.lines.reduce((m, l) => Math.max(m, l[2][0] || 0), 0);
    for (const [line, flat, cum, text] of r.lines) {
      const tr = el('tr', { class: cum[0] ? 'hot' : null });
      if (cum[0] && top > 0) tr.style.setProperty('--heat', String(Math.max(0.08, cum[0] / top)));
      cols.forEach((c, i) => tr.append(el('td', { text: listValue(flat[i], c.unit) }), el('td', { text: listValue(cum[i], c.unit) })));
      tr.append(el('td', { class: 'line', text: String(line) }), el('td', { class: 'code', text: text === null ? '' : text }));
      body.append(tr);
    }
    box.append(el('table', { class: 'listing' }, el('thead', {}, head), body));
    box.scrollIntoView({ block: 'nearest' });
  }

  // ---- tables
  const sort = { key: data.trace_type === 'call_count' && !SAMPLED ? 'calls' : 'value', dir: -1 };
  function columns(withPct) {
    if (SAMPLED) {
      // own: the samples where it is innermost; total: those with it anywhere on the stack
      return [{ key: 'name', title: 'frame' }, { key: 'calls', title: 'samples' },
        { key: 'value', title: 'own' + COL_UNIT }, { key: 'total', title: 'total' + COL_UNIT }, { key: 'pct', title: '%' }];
    }
    const cols = [{ key: 'name', title: 'function' }, { key: 'calls', title: 'calls' }];
    // call_count measures calls: its value is the calls column, and per call is always 1
    if (data.trace_type !== 'call_count') {
      cols.push({ key: 'value', title: TIME ? 'time (us)' : data.unit },
        { key: 'per', title: 'per call' + (TIME ? ' (us)' : '') });
    }
    cols.push({ key: 'pct', title: '%' });
    if (MEMORY) cols.push({ key: 'words', title: 'words' }, { key: 'blocks', title: 'blocks' });
    if (TIME && withPct) for (const k of PCT_COLS) cols.push({ key: k, title: k + ' (us)' });
    return cols;
  }
  function cell(key, r) {
    switch (key) {
      case 'calls': return int(r.calls);
      case 'value': return TIME ? fixed(r.value / 1000, 1) : int(r.value);
      case 'total': return TIME ? fixed(r.total / 1000, 1) : int(r.total);
      case 'per': return fixed(TIME ? r.per / 1000 : r.per, 2);
      case 'pct': return r.pct.toFixed(2);
      case 'words': return int(r.words);
      case 'p50': case 'p90': case 'p99': case 'max':
        return r[key] < 0 ? '-' : fixed(r[key] / 1000, 2);
      case 'blocks': return int(r.blocks);
      default: return '';
    }
  }
  function sorted(rows) {
    const k = sort.key;
    return rows.slice().sort((a, b) => {
      const x = a[k];
      const y = b[k];
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return c * sort.dir || a.name.localeCompare(b.name);
    });
  }
  function tables() {
    const box = $('tables');
    box.textContent = '';
    const procs = process >= 0 ? [process] : data.processes.map((_, i) => i);
    // a sampled process's total is its samples', those of no stack (no row) included
    const sampledTotal = new Map();
    for (const st of data.stacks) if (kept(st)) sampledTotal.set(st.process, (sampledTotal.get(st.process) || 0) + st.value);
    const ROWS = shownRows();
    const all = SAMPLED ? shownTotal() : ROWS.reduce((s, r) => s + r.value, 0);
    const heading = SAMPLED ? 'Frames per process (own: innermost; total: anywhere on the stack)'
      : data.processes.length === 1 && procs.length === 1 && data.processes[0].id === 'all' ? 'Functions' : 'Functions per process';
    if (process < 0 && data.processes.length > 1) box.append(el('h2', { text: 'Processes' }), processTable());
    box.append(el('h2', { text: heading }));
    if (ROWS.length === 0) {
      const filtered = SAMPLED && data.rows.length > 0;
      box.append(el('p', { text: filtered ? 'No sample has a frame the filters show.' : SAMPLED ? 'No sample was taken.' : 'No function was called.' }));
    }
    const byProcess = new Map();
    for (const r of ROWS) {
      if (!byProcess.has(r.process)) byProcess.set(r.process, []);
      byProcess.get(r.process).push(r);
    }
    if (procs.length > MANY) {
      // every process together: a row per function, summed; a process's own on demand
      const sums = new Map();
      for (const r of ROWS) {
        const t = sums.get(r.function) || { process: -1, function: r.function, calls: 0, value: 0, total: 0, words: 0, blocks: 0 };
        t.calls += r.calls;
        t.value += r.value;
        t.total += r.total || 0;
        t.words += r.words || 0;
        t.blocks += r.blocks;
        sums.set(r.function, t);
      }
      byProcess.clear();
      byProcess.set(-1, Array.from(sums.values()));
      procs.length = 0;
      procs.push(-1);
    }
    for (const p of procs) {
      const mine = byProcess.get(p) || [];
      if (!mine.length) continue;
      let withPct = false;
      const total = SAMPLED ? (p < 0 ? all : sampledTotal.get(p) || 0) : mine.reduce((s, r) => s + r.value, 0);
      const rows = mine.map((r) => {
        const f = data.functions[r.function];
        const q = PCT.get(p + ':' + r.function);
        if (q) withPct = true;
        return {
          name: f.mfa, fn: r.function, calls: r.calls, value: r.value, total: r.total || 0, words: r.words, blocks: r.blocks,
          per: r.calls > 0 ? r.value / r.calls : 0, pct: total > 0 ? (100 * r.value) / total : 0,
          p50: q ? q.p50_ns : -1, p90: q ? q.p90_ns : -1, p99: q ? q.p99_ns : -1, max: q ? q.max_ns : -1,
        };
      });
      if (p < 0) {
        box.append(el('section', { 'data-process': '' }, el('h3', {}, 'Every process together',
          el('span', { class: 'sub', text: ' — ' + value(total) + '; choose a process (in the table above or the menu) for its own functions' })),
        table(columns(false), sorted(rows).slice(0, PAGE), total)));
        continue;
      }
      const info = data.processes[p];
      const head = el('h3', {}, label({ kind: 'process', proc: p }),
        el('span', { class: 'sub', text: (info.initial_call ? ' — ' + info.initial_call : '') + ' — ' + value(total) + (all > 0 && data.processes.length > 1 ? ', ' + percent(total, all) + ' of all' : '') }));
      box.append(el('section', { 'data-process': info.id }, head, table(columns(withPct), sorted(rows), total)));
    }
    // Percentiles of every process together: a profile of an older tprof, callees included.
    const together = data.percentiles.filter((q) => data.processes[q.process].id === 'all');
    if (together.length && process < 0) {
      box.append(el('h2', { text: 'Call durations, every process (callees included)' }));
      const cols = ['function', 'calls', 'p50 (us)', 'p90 (us)', 'p99 (us)', 'max (us)'];
      const t = el('table', { class: 'functions percentiles' },
        el('thead', {}, el('tr', {}, ...cols.map((c) => el('th', { text: c })))));
      const body = el('tbody');
      for (const q of together) {
        const us = (ns) => fixed(ns / 1000, 2);
        body.append(el('tr', {}, el('td', { class: 'fn', text: data.functions[q.function].mfa }),
          el('td', { text: int(q.calls) }), el('td', { text: us(q.p50_ns) }), el('td', { text: us(q.p90_ns) }),
          el('td', { text: us(q.p99_ns) }), el('td', { text: us(q.max_ns) })));
      }
      t.append(body);
      box.append(t);
    }
  }
  // ---- the processes: summed by initial call or registered name, or one by one, a page of
  // rows at a time, sorted by a column, filtered by a text
  const procView = { page: 0, filter: '', key: 'value', dir: -1 };
  let procTotals = null; // per process: [calls, value]
  function processRows() {
    if (!procTotals) {
      procTotals = data.processes.map(() => [0, 0]);
      // a sampled process's samples are its stacks' (a row counts a sample once per frame)
      if (!SAMPLED) for (const r of data.rows) procTotals[r.process][0] += r.calls;
      for (const st of data.stacks) {
        if (!kept(st)) continue;
        if (SAMPLED) procTotals[st.process][0] += st.calls;
        procTotals[st.process][1] += st.value;
      }
    }
    if (grouping === 'process') {
      return data.processes.map((p, i) => ({ name: label({ kind: 'process', proc: i }), proc: i, key: null,
        count: p.count, calls: procTotals[i][0], value: procTotals[i][1], initial_call: p.initial_call }));
    }
    const list = focusedPath ? focusedAggregates() : grouping === 'name' ? data.aggregates.by_name : data.aggregates.by_initial_call;
    return list.map(([key, count, calls, v]) => ({ name: groupName(key), proc: -1, key, count, calls, value: v, initial_call: '' }));
  }
  // The sums by registered name or initial call (as grouping says) of the samples the focus
  // keeps: [key, processes, samples, value], from the page's processes (a summed one carries
  // its name, initial call and how many it stands for).
  function focusedAggregates() {
    const sums = new Map();
    data.processes.forEach((p, i) => {
      const key = groupKey(i);
      const t = sums.get(key) || [key, 0, 0, 0];
      t[1] += p.count;
      t[2] += procTotals[i][0];
      t[3] += procTotals[i][1];
      sums.set(key, t);
    });
    return Array.from(sums.values());
  }
  function processTable() {
    const all = SAMPLED ? shownTotal() : data.total;
    let rows = processRows();
    const filter = procView.filter.toLowerCase();
    if (filter) rows = rows.filter((r) => (r.name + ' ' + r.initial_call).toLowerCase().includes(filter));
    const k = procView.key;
    rows.sort((a, b) => {
      const x = a[k];
      const y = b[k];
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return c * procView.dir || a.name.localeCompare(b.name);
    });
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    procView.page = Math.min(procView.page, pages - 1);
    const first = procView.page * PAGE;
    const modes = [['initial_call', 'by initial call'], ['name', 'by registered name'], ['process', 'one by one']];
    const bar = el('div', { class: 'proc-bar' }, 'Group ',
      ...modes.map(([m, t]) => el('button', { type: 'button', class: 'mode', 'data-mode': m, 'aria-pressed': String(grouping === m), text: t })),
      el('input', { type: 'search', class: 'proc-filter', placeholder: 'Filter processes', 'aria-label': 'Filter processes', value: procView.filter }),
      el('span', { class: 'pager' },
        el('button', { type: 'button', class: 'page', 'data-page': String(procView.page - 1), disabled: procView.page === 0, text: '\u2039 previous' }),
        ' rows ' + int(rows.length ? first + 1 : 0) + '\u2013' + int(Math.min(first + PAGE, rows.length)) + ' of ' + int(rows.length) + ' ',
        el('button', { type: 'button', class: 'page', 'data-page': String(procView.page + 1), disabled: procView.page >= pages - 1, text: 'next \u203a' })));
    const cols = [{ key: 'name', title: grouping === 'process' ? 'process' : grouping === 'name' ? 'registered name' : 'initial call' },
      { key: 'count', title: 'processes' }, { key: 'calls', title: COUNTED }, { key: 'value', title: MEASURED + COL_UNIT },
      { key: 'pct', title: '%' }];
    const head = el('tr');
    for (const c of cols) {
      const th = el('th', { class: 'sortable', 'data-pkey': c.key, scope: 'col', text: c.title, title: 'Sort by ' + c.title });
      if (procView.key === c.key) th.setAttribute('aria-sort', procView.dir > 0 ? 'ascending' : 'descending');
      head.append(th);
    }
    const body = el('tbody');
    for (const r of rows.slice(first, first + PAGE)) {
      const pick = r.proc >= 0
        ? el('span', { class: 'fn', 'data-proc': String(r.proc), title: 'Show this process', text: r.name })
        : el('span', { class: 'fn', 'data-group': r.name, title: 'List these processes one by one', text: r.name });
      body.append(el('tr', {}, el('td', {}, pick, r.initial_call ? el('span', { class: 'loc', text: r.initial_call }) : null),
        el('td', { text: int(r.count) }), el('td', { text: int(r.calls) }),
        el('td', { text: TIME ? fixed(r.value / 1000, 1) : int(r.value) }), el('td', { text: percent(r.value, all) })));
    }
    return el('section', { class: 'processes', 'data-grouping': grouping }, bar,
      el('table', { class: 'functions' }, el('thead', {}, head), body));
  }
  function table(cols, rows, total) {
    const head = el('tr');
    for (const c of cols) {
      const th = el('th', { class: 'sortable', 'data-key': c.key, scope: 'col', text: c.title, title: 'Sort by ' + c.title });
      if (sort.key === c.key) th.setAttribute('aria-sort', sort.dir > 0 ? 'ascending' : 'descending');
      head.append(th);
    }
    const body = el('tbody');
    const widest = rows.reduce((m, r) => Math.max(m, r.pct), 0);
    for (const r of rows) {
      const f = data.functions[r.fn];
      const tr = el('tr', {}, el('td', {},
        el('span', { class: 'fn', 'data-fn': r.fn, title: 'Search the graph for this function', text: r.name }),
        el('span', { class: 'loc', text: where(f) }),
        LISTINGS.has(r.fn) ? el('button', { type: 'button', class: 'src', 'data-src': r.fn, title: 'Show its source, line by line', text: 'source' }) : null));
      for (const c of cols.slice(1)) {
        const td = el('td', { text: cell(c.key, r) });
        if (c.key === 'pct' && widest > 0) td.prepend(el('span', { class: 'bar', style: 'width:' + Math.round((36 * r.pct) / widest) + 'px' }));
        tr.append(td);
      }
      body.append(tr);
    }
    const sums = rows.reduce((s, r) => ({ calls: s.calls + r.calls, words: s.words + r.words, blocks: s.blocks + r.blocks }), { calls: 0, words: 0, blocks: 0 });
    const foot = el('tr', {}, el('td', { text: 'total' }));
    for (const c of cols.slice(1)) {
      const r = { calls: sums.calls, value: total, per: 0, pct: 100, words: sums.words, blocks: sums.blocks };
      // a sample is counted once per frame of its stack in 'samples' and 'total'
      const blank = c.key === 'per' || PCT_COLS.includes(c.key) || (SAMPLED && (c.key === 'calls' || c.key === 'total'));
      foot.append(el('td', { text: blank ? '' : cell(c.key, r) }));
    }
    return el('table', { class: 'functions' }, el('thead', {}, head), body, el('tfoot', {}, foot));
  }

  // ---- header
  function header() {
    const title = $('title');
    title.textContent = 'tprof — ' + (SAMPLED ? data.samples.what : data.trace_type + ' profile') + ' ';
    title.append(el('span', { class: 'unit', text: '(' + data.unit + ')' }));
    const s = $('summary');
    s.textContent = '';
    const together = data.processes.length === 1 && data.processes[0].id === 'all';
    // Under a focus, the samples it keeps beside them all (hide and the plumbing fold move
    // time between frames, and keep every sample).
    if (SAMPLED) prepareFilters();
    const focused = SAMPLED && focusedPath !== null;
    let shownCount = 0;
    for (const st of focused ? data.stacks : []) if (kept(st)) shownCount += st.calls;
    const count = SAMPLED ? data.samples.count : 0;
    s.append(WHAT + '. Total ', el('b', { text: value(focused ? shownTotal() : data.total) }),
      focused ? ' of ' + value(data.total) + ' shown' : '',
      together ? '' : ' in ', together ? '' : el('b', { text: int(ALL) }),
      together ? '' : ' process' + (ALL === 1 ? '' : 'es'),
      ', ', el('b', { text: String(data.functions.length) }), (SAMPLED ? ' frame' : ' function') + (data.functions.length === 1 ? '' : 's'),
      !SAMPLED ? (data.call_tree ? ', by call path.' : ', flat (one frame per function).')
        : focused ? ', from ' : ', from ' + int(count) + ' sample' + (count === 1 ? '' : 's') + ', by stack.');
    if (focused) {
      s.append(el('b', { id: 'shown-samples', text: int(shownCount) + ' of ' + int(count) + ' samples shown' }),
        ' (those with a frame the focus matches), by stack.');
    }
    if (data.note) s.append(el('span', { class: 'dropped', text: ' ' + data.note + '.' }));
    if (SAMPLED && data.samples.dropped_note) {
      s.append(el('span', { class: 'dropped', text: ' ' + data.samples.dropped_note + '.' }));
    }
    // what the CPU samples could see: the mechanism, the share captured, the rate taken beside
    // the rate asked, and each warning
    if (SAMPLED && data.samples.cpu) {
      const truth = el('ul', { class: 'truth' });
      for (const line of data.samples.cpu.summary) truth.append(el('li', { text: line + '.' }));
      for (const w of data.samples.cpu.warnings) truth.append(el('li', { class: 'dropped', text: 'Warning: ' + w + '.' }));
      s.append(truth);
    }
    if (data.runs.length) {
      const list = el('ul', { class: 'runs' });
      data.runs.forEach((r, i) => {
        const parts = [];
        if (r.duration_ns > 0) parts.push('ran ' + dur(r.duration_ns));
        if (r.started_unix_ms > 0) parts.push('started ' + new Date(r.started_unix_ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'));
        if (r.nodes && r.nodes.length) parts.push('node' + (r.nodes.length === 1 ? ' ' : 's ') + r.nodes.join(', '));
        list.append(el('li', {}, data.runs.length > 1 ? 'Run ' + i + ': ' : 'Run: ',
          el('code', { text: r.program || '(unnamed)' }), parts.length ? ' — ' + parts.join(', ') : ''));
      });
      s.append(list);
    }
    const sel = $('process');
    sel.textContent = '';
    const totals = data.processes.map(() => 0);
    for (const st of data.stacks) totals[st.process] += st.value;
    if (data.processes.length > 1) {
      sel.append(el('option', { value: '-1', text: 'All ' + procs(ALL) }));
    }
    // the largest processes (and the one chosen), not every one of a hundred thousand
    let listed = data.processes.map((_, i) => i);
    if (listed.length > MENU) {
      listed.sort((a, b) => totals[b] - totals[a] || a - b);
      listed = listed.slice(0, MENU);
      if (process >= 0 && !listed.includes(process)) listed.push(process);
    }
    for (const i of listed) {
      sel.append(el('option', { value: String(i), text: label({ kind: 'process', proc: i }) + ' — ' + percent(totals[i], data.total) }));
    }
    sel.disabled = data.processes.length <= 1;
    if (data.processes.length === 0) sel.append(el('option', { value: '-1', text: 'none' }));
    if (data.processes.length === 1) process = 0;
    sel.value = String(process);
  }

  // ---- events
  function setProcess(p) {
    process = p;
    build();
    applySearch();
    render();
    timelines();
    tables();
  }
  function zoomTo(n) {
    zoom = n || root;
    $('tooltip').hidden = true;
    render();
  }
  function setSearch(text) {
    $('search').value = text;
    term = text.trim().toLowerCase();
    applySearch();
    render();
    timelines();
  }
  const graph = $('graph');
  graph.addEventListener('click', (ev) => {
    let n = frameAt(ev);
    if (n && n.kind === 'merged') n = n.parent;
    if (n) zoomTo(n);
    if (n && LISTINGS.has(n.fn)) showListing(n.fn);
  });
  graph.addEventListener('mousemove', (ev) => {
    const n = frameAt(ev);
    tooltip(n, ev);
    detail(n);
  });
  graph.addEventListener('mouseleave', () => {
    tooltip(null);
    detail(null);
  });
  $('timeline-box').addEventListener('mousemove', (ev) => timelineTip(timelineFrame(ev), ev));
  $('timeline-box').addEventListener('mouseleave', () => timelineTip(null));
  $('reset').addEventListener('click', () => zoomTo(root));
  $('zoom-out').addEventListener('click', () => zoomTo(zoom.parent));
  // a process chosen from the table: in the menu too
  function choose(p) {
    process = p;
    header();
    setProcess(p);
    $('graph-box').scrollIntoView({ block: 'nearest' });
  }
  $('process').addEventListener('change', (ev) => setProcess(Number(ev.target.value)));
  $('search').addEventListener('input', (ev) => setSearch(ev.target.value));
  function setFilters() {
    readFilters();
    header();
    build();
    applySearch();
    render();
    procTotals = null;
    tables();
  }
  if (SAMPLED) {
    $('filters').hidden = false;
    $('plumbing-box').hidden = PLUMBING === 0;
    $('plumbing').checked = PLUMBING > 0;
    // as the command set them (`tprof report -f html --focus ...`), then as a link asks
    const set = data.samples.filters;
    if (set) {
      $('focus').value = set.focus || '';
      $('hide').value = set.hide || '';
      $('plumbing').checked = PLUMBING > 0 && set.plumbing;
    }
    filtersFromLink();
    readFilters();
    for (const id of ['focus', 'hide']) $(id).addEventListener('input', setFilters);
    $('plumbing').addEventListener('change', setFilters);
  }
  function redrawProcesses() {
    const old = $('tables').querySelector('section.processes');
    if (old) old.replaceWith(processTable());
  }
  $('tables').addEventListener('input', (ev) => {
    if (!ev.target.classList.contains('proc-filter')) return;
    procView.filter = ev.target.value;
    procView.page = 0;
    redrawProcesses();
    const box = $('tables').querySelector('.proc-filter');
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  });
  $('tables').addEventListener('click', (ev) => {
    const mode = ev.target.closest('button.mode[data-mode]');
    if (mode) {
      grouping = mode.dataset.mode;
      procView.page = 0;
      procView.filter = '';
      setProcess(process);
      return;
    }
    const page = ev.target.closest('button.page[data-page]');
    if (page) {
      procView.page = Math.max(0, Number(page.dataset.page));
      redrawProcesses();
      return;
    }
    const pth = ev.target.closest('th.sortable[data-pkey]');
    if (pth) {
      const key = pth.dataset.pkey;
      if (procView.key === key) procView.dir = -procView.dir;
      else {
        procView.key = key;
        procView.dir = key === 'name' ? 1 : -1;
      }
      redrawProcesses();
      return;
    }
    const proc = ev.target.closest('[data-proc]');
    if (proc) {
      choose(Number(proc.dataset.proc));
      return;
    }
    const group = ev.target.closest('[data-group]');
    if (group) {
      grouping = 'process';
      procView.filter = group.dataset.group === '(no registered name)' || group.dataset.group === '(no initial call)' ? '' : group.dataset.group;
      procView.page = 0;
      setProcess(process);
      return;
    }
    const th = ev.target.closest('th.sortable');
    if (th) {
      const key = th.dataset.key;
      if (sort.key === key) sort.dir = -sort.dir;
      else {
        sort.key = key;
        sort.dir = key === 'name' ? 1 : -1;
      }
      tables();
      return;
    }
    const src = ev.target.closest('button.src[data-src]');
    if (src) {
      showListing(Number(src.dataset.src));
      return;
    }
    const fn = ev.target.closest('.fn[data-fn]');
    if (fn) {
      setSearch(data.functions[Number(fn.dataset.fn)].mfa);
      $('graph-box').scrollIntoView({ block: 'nearest' });
    }
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      if (document.activeElement === $('search') && $('search').value) setSearch('');
      else zoomTo(root);
    } else if (ev.key === '/' && document.activeElement !== $('search')) {
      ev.preventDefault();
      $('search').focus();
    }
  });
  let pending = 0;
  window.addEventListener('resize', () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => {
      render();
      timelines();
    });
  });

  header();
  setProcess(process);
})();
