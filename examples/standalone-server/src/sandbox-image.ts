import { fileURLToPath } from 'node:url';
import { commandImageProvider, type SandboxImageProvider } from '@acs/adapter-docker/config';

/** `acs-sandbox:*`, built at start when a spec names one the engine lacks. */
export const isSandboxImage = (image: string): boolean => /^acs-sandbox:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(image);

/** `acs-openhands-agent-server:*` (about 930 MB, 2 to 4 minutes to build): built on first use only. */
const isAgentServerImage = (image: string): boolean =>
  /^acs-openhands-agent-server:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(image);

const script = (name: string) => fileURLToPath(new URL(`../../../scripts/${name}`, import.meta.url));

/**
 * Builds the images of the specs when the engine lacks one: `acs-sandbox:*` with
 * scripts/build-sandbox-image.sh (from a Debian base image where one can be pulled, with
 * debootstrap otherwise, root only), `acs-openhands-agent-server:*` with
 * scripts/build-agent-server-image.sh (debootstrap trixie and pip, root only).
 */
export function sandboxImageProvider(images: readonly string[]): SandboxImageProvider {
  const sandbox = commandImageProvider({
    images: images.filter(isSandboxImage),
    command: (image) => ['bash', script('build-sandbox-image.sh'), '--tag', image],
    linePrefix: 'build-sandbox-image: ',
  });
  const agentServer = commandImageProvider({
    images: images.filter(isAgentServerImage),
    command: (image) => ['bash', script('build-agent-server-image.sh'), '--tag', image],
    linePrefix: 'build-agent-server-image: ',
  });
  return {
    provides: (image) => sandbox.provides(image) || agentServer.provides(image),
    provide: (image, onProgress) => (sandbox.provides(image) ? sandbox : agentServer).provide(image, onProgress),
  };
}
