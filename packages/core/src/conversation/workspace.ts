/**
 * What a conversation's workspace holds once its repository is prepared (by the agent's
 * workspace setup, `@acs/agent`): kept on the conversation record, read by the prompt.
 *
 * Repository guidance is what a repository tells agents about itself. Always-on instructions
 * (`AGENTS.md`, `.openhands/microagents/repo.md`, microagents without triggers) go into the
 * system prompt; knowledge files (`.openhands/microagents/*.md` with `triggers:` in their
 * front matter) are added to the user message whose words match one of their triggers.
 */

/** One always-on instruction file. */
export interface GuidanceFile {
  /** Path relative to the repository root. */
  path: string;
  content: string;
}

/** A knowledge file, loaded when a user message mentions one of its triggers. */
export interface KnowledgeFile extends GuidanceFile {
  name: string;
  /** Lower-cased trigger words or phrases. */
  triggers: string[];
}

export interface RepositoryGuidance {
  instructions: GuidanceFile[];
  knowledge: KnowledgeFile[];
}

/** Where a conversation's repository is, once prepared; kept on the conversation record. */
export interface ConversationWorkspace {
  repository: string;
  /** Absolute path of the clone in the sandbox; the agent's working directory. */
  repository_dir: string;
  branch: string;
  guidance: RepositoryGuidance;
}
