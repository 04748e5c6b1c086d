import {
  describeSandboxExecContract,
  describeSandboxRuntimeContract,
  describeSandboxShellContract,
} from '@acs/core/testing';
import { bookworm, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';

onCluster('the runtime contracts on Kubernetes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const make = async () => kubernetesRuntime(kubeConfig, await namespace);
  describeSandboxRuntimeContract('kubernetes', make, { spec: bookworm });
  describeSandboxExecContract('kubernetes', make, { spec: bookworm, pauseKeeps: 'workspace' });
  describeSandboxShellContract('kubernetes', make, { spec: bookworm, pauseKeeps: 'workspace' });
});
