import { z } from 'zod';
import { outcome, type AgentTool } from './tool.js';

const ThinkArguments = z.object({ thought: z.string() });
const FinishArguments = z.object({ message: z.string().optional().default('') });

export const thinkTool: AgentTool<typeof ThinkArguments> = {
  definition: {
    name: 'think',
    description:
      'Think out loud: reason about the problem, weigh options, plan the next steps. Nothing runs and nothing changes; the thought is recorded.',
    parameters: {
      type: 'object',
      properties: { thought: { type: 'string', description: 'The thought.' } },
      required: ['thought'],
    },
  },
  arguments: ThinkArguments,
  run: () => Promise.resolve(outcome('Your thought has been logged.')),
};

export const finishTool: AgentTool<typeof FinishArguments> = {
  definition: {
    name: 'finish',
    description:
      'Finish: call this when the task is done, or when you cannot go on without the user. The message tells the user what was done and anything left open.',
    parameters: {
      type: 'object',
      properties: { message: { type: 'string', description: 'The final message to the user.' } },
      required: ['message'],
    },
  },
  arguments: FinishArguments,
  run: (args) => Promise.resolve(outcome('The task is marked as finished.', { finished: { message: args.message } })),
};
