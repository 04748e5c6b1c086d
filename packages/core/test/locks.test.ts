import { describeLocksContract } from '../src/testing/index.js';
import { InProcessLocks } from '../src/ports.js';

// One process: both holders are the same locks.
describeLocksContract('in-process', () => {
  const locks = new InProcessLocks();
  return Promise.resolve({ first: locks, second: locks });
});
