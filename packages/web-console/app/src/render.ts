/**
 * Text into safe HTML with maintained libraries: markdown by marked, sanitised by DOMPurify
 * (a message is the model's or a user's words: never trusted), code by highlight.js (the
 * common languages only), line diffs by jsdiff.
 */
import DOMPurify from 'dompurify';
import { diffLines } from 'diff';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import css from 'highlight.js/lib/languages/css';
import diffLanguage from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdownLanguage from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import { Marked } from 'marked';

for (const [name, language] of Object.entries({
  bash,
  css,
  diff: diffLanguage,
  go,
  java,
  javascript,
  json,
  markdown: markdownLanguage,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
})) {
  hljs.registerLanguage(name, language);
}

const EXTENSION_LANGUAGES: Record<string, string> = {
  sh: 'bash',
  bash: 'bash',
  css: 'css',
  diff: 'diff',
  patch: 'diff',
  go: 'go',
  java: 'java',
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascript',
  json: 'json',
  md: 'markdown',
  py: 'python',
  rs: 'rust',
  sql: 'sql',
  ts: 'typescript',
  tsx: 'typescript',
  mts: 'typescript',
  html: 'xml',
  xml: 'xml',
  svg: 'xml',
  yml: 'yaml',
  yaml: 'yaml',
  toml: 'yaml',
};

/** The highlight.js language of a file path, if we have it. */
export const languageOfPath = (path: string): string | undefined =>
  EXTENSION_LANGUAGES[path.split('.').pop()?.toLowerCase() ?? ''];

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Highlighted HTML for code (escaped text when the language is unknown or the code is huge). */
export function highlight(code: string, language: string | undefined): string {
  if (!language || !hljs.getLanguage(language) || code.length > 200_000) return escape(code);
  return hljs.highlight(code, { language, ignoreIllegals: true }).value;
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }) {
      const language = lang?.split(/\s/)[0];
      return `<pre class="code"><code class="hljs">${highlight(text, language && hljs.getLanguage(language) ? language : undefined)}</code></pre>`;
    },
  },
});

/** Markdown as sanitised HTML: no scripts, no event handlers, links open in a new tab. */
export function markdown(text: string): string {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, { ADD_ATTR: ['target'], FORBID_TAGS: ['style', 'form', 'input'] });
}

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
  // Images from outside the service are not fetched (the page's policy allows data: only); show them as links.
  if (node.tagName === 'IMG' && !/^data:image\//i.test(node.getAttribute('src') ?? '')) {
    const link = document.createElement('a');
    link.href = node.getAttribute('src') ?? '#';
    link.textContent = node.getAttribute('alt') || 'image';
    node.replaceWith(link);
  }
});

export interface DiffLine {
  kind: 'added' | 'removed' | 'same';
  text: string;
}

/** The lines that changed from `before` to `after`, with up to `context` unchanged lines around each change. */
export function lineDiff(before: string, after: string, context = 3): (DiffLine | { kind: 'gap'; count: number })[] {
  const lines: DiffLine[] = [];
  for (const part of diffLines(before, after)) {
    const kind = part.added ? 'added' : part.removed ? 'removed' : 'same';
    const text = part.value.endsWith('\n') ? part.value.slice(0, -1) : part.value;
    for (const line of text.split('\n')) lines.push({ kind, text: line });
  }
  const keep = lines.map(
    (line, i) =>
      line.kind !== 'same' || lines.slice(Math.max(0, i - context), i + context + 1).some((l) => l.kind !== 'same'),
  );
  const out: (DiffLine | { kind: 'gap'; count: number })[] = [];
  let skipped = 0;
  lines.forEach((line, i) => {
    if (keep[i]) {
      if (skipped > 0) out.push({ kind: 'gap', count: skipped });
      skipped = 0;
      out.push(line);
    } else skipped++;
  });
  if (skipped > 0) out.push({ kind: 'gap', count: skipped });
  return out;
}
