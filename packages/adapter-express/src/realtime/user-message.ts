import type { SendMessageRequest } from '@acs/core/schemas';

/** A message a UI sent over a live channel, as a user message that runs the agent: its text (if not blank) and its images. */
export function userMessage(text: string, imageUrls: readonly string[]): SendMessageRequest {
  const content = [
    ...(text.trim() ? [{ type: 'text' as const, text }] : []),
    ...(imageUrls.length > 0 ? [{ type: 'image' as const, image_urls: [...imageUrls] }] : []),
  ];
  return { role: 'user', content, run: true };
}
