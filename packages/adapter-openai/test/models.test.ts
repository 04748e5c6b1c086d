import { describe, expect, it } from 'vitest';
import { OLLAMA_BASE_URL, OPENAI_BASE_URL, OPENROUTER_BASE_URL, resolveModel } from '../src/index.js';

const GATEWAY = 'https://llm.example.com/v1';

describe('resolveModel', () => {
  it.each([
    // [llm_model, llm_base_url, sent model, base URL, provider]
    ['gpt-4o', null, 'gpt-4o', OPENAI_BASE_URL, 'openai'],
    ['gpt-4o', GATEWAY, 'gpt-4o', GATEWAY, 'custom'],
    ['openai/gpt-4o', null, 'gpt-4o', OPENAI_BASE_URL, 'openai'],
    ['openai/gpt-4o', GATEWAY, 'gpt-4o', GATEWAY, 'openai'],
    ['litellm_proxy/claude-sonnet-4', GATEWAY, 'claude-sonnet-4', GATEWAY, 'litellm_proxy'],
    ['litellm_proxy/anthropic/claude-sonnet-4', GATEWAY, 'anthropic/claude-sonnet-4', GATEWAY, 'litellm_proxy'],
    ['litellm_proxy/gpt-4o', null, 'gpt-4o', null, 'litellm_proxy'],
    ['openrouter/anthropic/claude-sonnet-4.5', null, 'anthropic/claude-sonnet-4.5', OPENROUTER_BASE_URL, 'openrouter'],
    ['openrouter/deepseek/deepseek-chat', GATEWAY, 'deepseek/deepseek-chat', GATEWAY, 'openrouter'],
    ['ollama/llama3.1:8b', null, 'llama3.1:8b', OLLAMA_BASE_URL, 'ollama'],
    ['ollama_chat/qwen2.5-coder:32b', null, 'qwen2.5-coder:32b', OLLAMA_BASE_URL, 'ollama'],
    ['ollama/llama3.1', 'http://gpu-box:11434', 'llama3.1', 'http://gpu-box:11434/v1', 'ollama'],
    ['ollama/llama3.1', 'http://gpu-box:11434/', 'llama3.1', 'http://gpu-box:11434/v1', 'ollama'],
    ['ollama/llama3.1', 'http://gpu-box:11434/v1', 'llama3.1', 'http://gpu-box:11434/v1', 'ollama'],
    [
      'anthropic/claude-sonnet-4-20250514',
      null,
      'claude-sonnet-4-20250514',
      'https://api.anthropic.com/v1',
      'anthropic',
    ],
    ['anthropic/claude-sonnet-4-20250514', GATEWAY, 'anthropic/claude-sonnet-4-20250514', GATEWAY, 'custom'],
    [
      'anthropic/claude-sonnet-4-20250514',
      'https://api.anthropic.com/v1/',
      'claude-sonnet-4-20250514',
      'https://api.anthropic.com/v1',
      'anthropic',
    ],
    ['deepseek/deepseek-chat', null, 'deepseek-chat', 'https://api.deepseek.com/v1', 'deepseek'],
    ['deepseek/deepseek-chat', GATEWAY, 'deepseek/deepseek-chat', GATEWAY, 'custom'],
    [
      'gemini/gemini-2.5-pro',
      null,
      'gemini-2.5-pro',
      'https://generativelanguage.googleapis.com/v1beta/openai',
      'gemini',
    ],
    ['meta-llama/Llama-3.3-70B-Instruct', GATEWAY, 'meta-llama/Llama-3.3-70B-Instruct', GATEWAY, 'custom'],
    ['meta-llama/Llama-3.3-70B-Instruct', null, 'meta-llama/Llama-3.3-70B-Instruct', null, 'custom'],
  ] as const)('%s with base_url %s → %s at %s (%s)', (model, base_url, sent, baseUrl, provider) => {
    expect(resolveModel({ model, base_url })).toEqual({ model: sent, baseUrl, provider });
  });

  it('treats an empty or blank base_url as none, and trims', () => {
    expect(resolveModel({ model: ' gpt-4o ', base_url: '' })).toEqual({
      model: 'gpt-4o',
      baseUrl: OPENAI_BASE_URL,
      provider: 'openai',
    });
    expect(resolveModel({ model: 'gpt-4o', base_url: '   ' })).toEqual({
      model: 'gpt-4o',
      baseUrl: OPENAI_BASE_URL,
      provider: 'openai',
    });
    expect(resolveModel({ model: 'gpt-4o', base_url: 'http://localhost:4000/v1///' }).baseUrl).toBe(
      'http://localhost:4000/v1',
    );
  });

  it('matches prefixes case-insensitively and keeps the rest as written', () => {
    expect(resolveModel({ model: 'OpenAI/GPT-4o', base_url: null })).toEqual({
      model: 'GPT-4o',
      baseUrl: OPENAI_BASE_URL,
      provider: 'openai',
    });
  });
});
