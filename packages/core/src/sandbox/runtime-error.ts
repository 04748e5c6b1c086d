/** What every runtime operation fails with (the shell's too). */
export interface SandboxRuntimeError {
  /**
   * `unavailable`: the runtime itself cannot be reached (engine down); `not_found`: the
   * sandbox, or the file asked for, does not exist; `is_directory`: a file was asked for and the
   * path names a directory (readFile); `failed`: this operation failed.
   */
  type: 'unavailable' | 'not_found' | 'is_directory' | 'failed';
  message: string;
}
