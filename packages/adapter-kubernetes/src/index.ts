/**
 * @acs/adapter-kubernetes: the sandbox runtime on Kubernetes. One StatefulSet of one pod per
 * sandbox in the installation's namespace, the workspace on a claim that outlives the pod,
 * labelled so a restarted service finds them; commands and files through `pods/exec`, never a
 * pod's IP. Pause scales to zero (the claim stays), resume back to one.
 *
 * ```ts
 * const runtime = await createKubernetesRuntime({ namespace: 'acs-sandboxes' }); // kubeconfig or in-cluster
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime });
 * ```
 */
export { createKubernetesRuntime, type CreateKubernetesRuntimeOptions } from './connect.js';
export { KubernetesSandboxRuntime, type KubernetesRuntimeOptions } from './kubernetes-runtime.js';
export { LABELS, SANDBOX_CAPABILITIES, type KubernetesPlacement, type KubernetesResources } from './manifest.js';
export { DEFAULT_EGRESS_EXCEPT, sandboxNetworkPolicy, type NetworkPolicyOptions } from './network-policy.js';
