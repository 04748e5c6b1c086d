import type { McpCallResult, McpToolInfo } from '@acs/core/ports';
import type { CallToolResult, ContentBlock, Tool } from '@modelcontextprotocol/sdk/types.js';

/** A tool as the server listed it, in the port's shape (only the annotations it gave). */
export function toToolInfo(tool: Tool): McpToolInfo {
  const annotations: McpToolInfo['annotations'] = {};
  const hints = tool.annotations;
  if (typeof hints?.readOnlyHint === 'boolean') annotations.read_only = hints.readOnlyHint;
  if (typeof hints?.destructiveHint === 'boolean') annotations.destructive = hints.destructiveHint;
  if (typeof hints?.openWorldHint === 'boolean') annotations.open_world = hints.openWorldHint;
  return {
    name: tool.name,
    description: tool.description ?? null,
    input_schema: tool.inputSchema,
    annotations,
  };
}

/** Bytes in base64 data, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = data.replace(/\s/g, '');
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}

function describe(block: ContentBlock): { text: boolean; line: string } {
  switch (block.type) {
    case 'text':
      return { text: true, line: block.text };
    case 'image':
      return { text: false, line: `[image: ${block.mimeType}, ${base64Bytes(block.data)} bytes]` };
    case 'audio':
      return { text: false, line: `[audio: ${block.mimeType}, ${base64Bytes(block.data)} bytes]` };
    case 'resource': {
      const resource = block.resource;
      const embedded = 'text' in resource && typeof resource.text === 'string' ? `\n${resource.text}` : '';
      return { text: embedded !== '', line: `[resource: ${resource.uri}]${embedded}` };
    }
    case 'resource_link':
      return { text: false, line: `[resource: ${block.uri}]` };
  }
}

/** A tool result flattened for the model: text joined, other content described in words. */
export function flattenCallResult(result: CallToolResult): McpCallResult {
  const lines: string[] = [];
  let sawText = false;
  for (const block of result.content) {
    const { text, line } = describe(block);
    sawText ||= text;
    lines.push(line);
  }
  if (!sawText && result.structuredContent !== undefined) lines.push(JSON.stringify(result.structuredContent));
  return { content: lines.join('\n'), is_error: result.isError === true };
}
