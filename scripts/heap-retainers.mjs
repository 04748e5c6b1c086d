// What holds a V8 heap: the objects with the largest retained size (what would be freed with
// them), found with the dominator tree of a .heapsnapshot, each with the path that holds it.
//
//   node --heapsnapshot-signal=SIGUSR2 dist/main.js & kill -USR2 <pid>   # writes Heap.*.heapsnapshot
//   node scripts/heap-retainers.mjs Heap.….heapsnapshot [how many, default 15]
//
// Retained sizes follow Chrome DevTools: weak edges do not hold, and an object is retained by
// its immediate dominator. Objects that are plain containers of one bigger object are skipped in
// favour of what they hold, so the list names distinct things.
import { readFileSync } from 'node:fs';

const [file, howMany = '15'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/heap-retainers.mjs <file.heapsnapshot> [how many]');
  process.exit(2);
}
const snapshot = JSON.parse(readFileSync(file, 'utf8'));
const meta = snapshot.snapshot.meta;
const NF = meta.node_fields.length;
const EF = meta.edge_fields.length;
const nodeTypes = meta.node_types[0];
const edgeTypes = meta.edge_types[0];
const [TYPE, NAME, SIZE, EDGES] = ['type', 'name', 'self_size', 'edge_count'].map((f) => meta.node_fields.indexOf(f));
const [ETYPE, ENAME, ETO] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f));
const { nodes, edges, strings } = snapshot;
const N = nodes.length / NF;

const firstEdge = new Uint32Array(N + 1);
for (let n = 0, e = 0; n < N; n++) {
  firstEdge[n] = e;
  e += nodes[n * NF + EDGES] * EF;
}
firstEdge[N] = edges.length;
const holds = (e) => edgeTypes[edges[e + ETYPE]] !== 'weak';

// Depth-first order from the root (node 0), then immediate dominators (Cooper, Harvey, Kennedy).
const order = new Int32Array(N).fill(-1);
const postorder = [];
const stack = [0];
const visitedEdge = new Uint32Array(N);
order[0] = -2;
for (let n = 0; n < N; n++) visitedEdge[n] = firstEdge[n];
while (stack.length > 0) {
  const n = stack[stack.length - 1];
  let pushed = false;
  while (visitedEdge[n] < firstEdge[n + 1]) {
    const e = visitedEdge[n];
    visitedEdge[n] += EF;
    if (!holds(e)) continue;
    const to = edges[e + ETO] / NF;
    if (order[to] !== -1) continue;
    order[to] = -2;
    stack.push(to);
    pushed = true;
    break;
  }
  if (!pushed) {
    stack.pop();
    order[n] = postorder.length;
    postorder.push(n);
  }
}
const predecessors = Array.from({ length: N }, () => []);
for (let n = 0; n < N; n++) {
  if (order[n] < 0) continue;
  for (let e = firstEdge[n]; e < firstEdge[n + 1]; e += EF) if (holds(e)) predecessors[edges[e + ETO] / NF].push(n);
}
const dominator = new Int32Array(N).fill(-1);
dominator[0] = 0;
const intersect = (a, b) => {
  while (a !== b) {
    while (order[a] < order[b]) a = dominator[a];
    while (order[b] < order[a]) b = dominator[b];
  }
  return a;
};
for (let changed = true; changed;) {
  changed = false;
  for (let i = postorder.length - 2; i >= 0; i--) {
    const n = postorder[i];
    let next = -1;
    for (const p of predecessors[n]) if (dominator[p] !== -1) next = next === -1 ? p : intersect(p, next);
    if (next !== -1 && dominator[n] !== next) {
      dominator[n] = next;
      changed = true;
    }
  }
}
const retained = new Float64Array(N);
for (let n = 0; n < N; n++) retained[n] = nodes[n * NF + SIZE];
for (const n of postorder) if (n !== 0 && dominator[n] >= 0) retained[dominator[n]] += retained[n];

const label = (n) => {
  const name = strings[nodes[n * NF + NAME]].replace(/\s+/g, ' ').slice(0, 70);
  return `${nodeTypes[nodes[n * NF + TYPE]]} ${name}`;
};
const edgeName = (e) => {
  const type = edgeTypes[edges[e + ETYPE]];
  return type === 'element' || type === 'hidden' ? `[${edges[e + ENAME]}]` : strings[edges[e + ENAME]];
};
const pathTo = (n) => {
  const steps = [];
  for (let cur = n, depth = 0; cur !== 0 && depth < 6; depth++) {
    const holder = dominator[cur];
    let via = null;
    for (let e = firstEdge[holder]; e < firstEdge[holder + 1]; e += EF)
      if (edges[e + ETO] / NF === cur) via = edgeName(e);
    if (holder === 0) break;
    steps.push(`${via ?? '(through several)'} <- ${label(holder)}`);
    cur = holder;
  }
  return steps;
};

const total = retained[0];
const MiB = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
console.log(`heap: ${MiB(total)} in ${N} objects`);
const byType = new Map();
for (let n = 0; n < N; n++) {
  const type = nodeTypes[nodes[n * NF + TYPE]];
  byType.set(type, (byType.get(type) ?? 0) + nodes[n * NF + SIZE]);
}
console.log(
  `by kind: ${[...byType]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([type, size]) => `${type} ${MiB(size)}`)
    .join(', ')}\n`,
);
// Skip the root, synthetic roots and objects that hold little of their own beyond one child.
const candidates = [...Array(N).keys()]
  .filter((n) => n !== 0 && order[n] >= 0 && !['synthetic'].includes(nodeTypes[nodes[n * NF + TYPE]]))
  .sort((a, b) => retained[b] - retained[a]);
const shown = [];
for (const n of candidates) {
  if (shown.length >= Number(howMany)) break;
  // A dominator of something already shown that retains barely more than it is the same thing.
  if (
    shown.some((s) => {
      for (let d = s; d !== 0; d = dominator[d]) if (d === n) return retained[n] < retained[s] * 1.2;
      return false;
    })
  )
    continue;
  if (
    shown.some((s) => {
      for (let d = n; d !== 0; d = dominator[d]) if (d === s) return true;
      return false;
    })
  )
    continue;
  shown.push(n);
  console.log(
    `${MiB(retained[n]).padStart(10)}  ${((retained[n] / total) * 100).toFixed(1).padStart(5)}%  ${label(n)}`,
  );
  for (const step of pathTo(n)) console.log(`                     ${step}`);
}
