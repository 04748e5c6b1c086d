import { describeSandboxExecContract, describeSandboxRuntimeContract } from '@acs/core/testing';
import { bookworm, dockerRuntime } from './engine.js';

describeSandboxRuntimeContract('docker', () => dockerRuntime(), { spec: bookworm });
describeSandboxExecContract('docker', () => dockerRuntime(), { spec: bookworm });
