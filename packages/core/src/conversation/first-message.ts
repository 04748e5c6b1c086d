import type { CreateMicroagent, SuggestedTask } from './schema.js';

/**
 * The first user message for conversations started from a suggested task (an issue, or one of
 * the pull-request tasks OpenHands suggests) or to create a
 * microagent: our own wording, specific enough that the agent knows where to look and
 * when it is done.
 */
export function suggestedTaskMessage(task: SuggestedTask): string {
  const pr = `pull request #${task.issue_number} of the repository ${task.repo} ("${task.title.trim()}")`;
  const onPullRequest = (problem: string, steps: string[]) =>
    [
      `Please work on ${pr}: ${problem}`,
      '',
      `1. Check out the pull request's branch and read its description and discussion (e.g. with the provider's API or CLI).`,
      ...steps.map((step, i) => `${i + 2}. ${step}`),
      `${steps.length + 2}. Commit on the pull request's branch. Do not push unless asked.`,
      `${steps.length + 3}. Finish with a short summary of what you changed and how you checked it.`,
    ].join('\n');
  switch (task.task_type) {
    case 'MERGE_CONFLICTS':
      return onPullRequest('it has merge conflicts.', [
        'Merge its base branch into it and resolve each conflict, keeping the intent of both sides.',
        'Run the tests that cover the files you touched.',
      ]);
    case 'FAILING_CHECKS':
      return onPullRequest('some of its checks fail.', [
        'Find which checks fail and why, and reproduce the failure locally.',
        'Make the smallest change that fixes it, and run those checks again.',
      ]);
    case 'UNRESOLVED_COMMENTS':
      return onPullRequest('it has unresolved review comments.', [
        'Read each unresolved comment and address it (or say why not).',
        'Run the tests that cover the files you touched.',
      ]);
    case 'OPEN_PR':
      return onPullRequest('finish it so it can be merged.', [
        'Find what is missing or broken (tests, review comments, failing checks) and fix it.',
        'Run the tests that cover the files you touched.',
      ]);
    default:
      return [
        `Please resolve issue #${task.issue_number} of the repository ${task.repo}: "${task.title.trim()}".`,
        '',
        `1. Read the issue and its discussion first (e.g. with the provider's API or CLI), and find the code it concerns.`,
        '2. Reproduce the problem, or write a test that shows it, before changing anything.',
        '3. Make the smallest change that fixes it, in the style of the code around it, and run the tests that cover it.',
        '4. Commit on a new branch with a message that references the issue. Do not push or open a pull request unless asked.',
        '5. Finish with a short summary: the cause, the fix, and how you checked it.',
      ].join('\n');
  }
}

export function createMicroagentMessage(request: CreateMicroagent): string {
  const topic = request.title?.trim();
  return [
    `Please write a microagent for the repository ${request.repo}${topic ? `, about: "${topic}"` : ''}.`,
    '',
    'A microagent is a Markdown file that gives an agent working in this repository the knowledge it would otherwise have to rediscover.',
    '1. Explore the repository: its layout, how to install, build, lint and test it, its conventions, and anything surprising.',
    topic
      ? `2. Write .openhands/microagents/<a-short-name>.md with front matter listing the \`triggers:\` (keywords) that should load it, then the guidance about "${topic}".`
      : '2. Write .openhands/microagents/repo.md (always loaded) with that guidance: short, concrete, with the exact commands.',
    '3. Check every command you write down by running it.',
    '4. Commit the file on a new branch. Do not push or open a pull request unless asked.',
  ].join('\n');
}
