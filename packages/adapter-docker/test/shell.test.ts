import { describeSandboxShellContract } from '@acs/core/testing';
import { bookworm, dockerRuntime } from './engine.js';

describeSandboxShellContract('docker', () => dockerRuntime(), { spec: bookworm });
