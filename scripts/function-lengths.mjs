#!/usr/bin/env node
// Lists the functions longer than a limit (default 100 lines) in the sources of the packages and
// examples, longest first, as `lines  file:line  name`. A function's lines run from its first
// token to its closing brace, nested functions included (each nested one is listed on its own too).
//
//   node scripts/function-lengths.mjs            functions over 100 lines, outside the exclusions
//   node scripts/function-lengths.mjs --top 10   the ten longest, whatever their length
//   node scripts/function-lengths.mjs --all      the exclusions too
//   node scripts/function-lengths.mjs --check    exit 1 when any function passes the limit
//
// Left out (issue 28): route tables (a file under `adapter-express/src/routes/`, whose functions
// return the route definitions as data, and `buildRoutes`) and contract suites (`core/src/testing`,
// each a list of `it` cases). Tests, benchmarks and scripts are not read.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const all = args.includes('--all');
const check = args.includes('--check');
const topIndex = args.indexOf('--top');
const top = topIndex >= 0 ? Number(args[topIndex + 1]) : null;
const limitIndex = args.indexOf('--limit');
const limit = limitIndex >= 0 ? Number(args[limitIndex + 1]) : 100;

const EXCLUDED = [/^packages\/adapter-express\/src\/routes\//, /^packages\/core\/src\/testing\//];
const EXCLUDED_FUNCTIONS = new Set(['packages/adapter-express/src/routes.ts:buildRoutes']);

function sourceFiles(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'app-dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...sourceFiles(path));
    else if (/\.(ts|tsx|mts)$/.test(name) && !name.endsWith('.d.ts') && !name.endsWith('.d.mts')) found.push(path);
  }
  return found;
}

const roots = [];
for (const group of ['packages', 'examples']) {
  for (const name of readdirSync(join(root, group))) {
    for (const sub of ['src', 'app']) {
      const dir = join(root, group, name, sub);
      try {
        if (statSync(dir).isDirectory()) roots.push(dir);
      } catch {
        // no such folder in this package
      }
    }
  }
}

function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name && ts.isPrivateIdentifier(node.name)) return node.name.text;
  if (node.name && ts.isStringLiteral(node.name)) return node.name.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && (ts.isIdentifier(parent.name) || ts.isStringLiteral(parent.name)))
    return parent.name.text;
  if (parent && ts.isPropertyDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isCallExpression(parent)) {
    const callee = parent.expression.getText().split('\n')[0];
    return `(callback of ${callee.length > 40 ? `${callee.slice(0, 40)}…` : callee})`;
  }
  return '(anonymous)';
}

const functions = [];
for (const dir of roots) {
  for (const file of sourceFiles(dir)) {
    const path = relative(root, file);
    const text = readFileSync(file, 'utf8');
    const source = ts.createSourceFile(
      file,
      text,
      ts.ScriptTarget.Latest,
      true,
      file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
    );
    const visit = (node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
        const name = nameOf(node);
        const excluded = EXCLUDED.some((pattern) => pattern.test(path)) || EXCLUDED_FUNCTIONS.has(`${path}:${name}`);
        functions.push({ path, line: start, name, lines: end - start + 1, excluded });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}

const shown = functions
  .filter((f) => all || !f.excluded)
  .sort((a, b) => b.lines - a.lines || a.path.localeCompare(b.path) || a.line - b.line);
const listed = top !== null ? shown.slice(0, top) : shown.filter((f) => f.lines > limit);
for (const f of listed)
  console.log(`${String(f.lines).padStart(5)}  ${f.path}:${f.line}  ${f.name}${f.excluded ? '  (excluded)' : ''}`);
if (top === null)
  console.log(
    `${listed.length} function(s) over ${limit} lines${all ? '' : ' (route tables and contract suites left out)'}`,
  );
if (check && shown.some((f) => f.lines > limit)) process.exit(1);
