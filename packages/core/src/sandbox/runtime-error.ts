/** What every runtime operation fails with (the shell's too). */
export interface SandboxRuntimeError {
  /**
   * `unavailable`: the runtime itself cannot be reached (engine down); `not_found`: the
   * sandbox, or the file asked for, does not exist; `failed`: this operation failed.
   */
  type: 'unavailable' | 'not_found' | 'failed';
  message: string;
}
