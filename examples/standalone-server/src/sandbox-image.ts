import { fileURLToPath } from 'node:url';
import { commandImageProvider, type SandboxImageProvider } from '@acs/adapter-docker';

/** The images the repository's build script makes: `acs-sandbox:<tag>` (the default spec's is acs-sandbox:bookworm), all Debian bookworm with bash, git and python3. */
export const isBuildableImage = (image: string): boolean => /^acs-sandbox:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(image);

const BUILD_SCRIPT = fileURLToPath(new URL('../../../scripts/build-sandbox-image.sh', import.meta.url));

/**
 * Builds `acs-sandbox:*` images with scripts/build-sandbox-image.sh when the engine lacks one:
 * from a Debian base image where one can be pulled, with debootstrap otherwise (root only).
 */
export function sandboxImageProvider(images: readonly string[]): SandboxImageProvider {
  return commandImageProvider({
    images: images.filter(isBuildableImage),
    command: (image) => ['bash', BUILD_SCRIPT, '--tag', image],
    linePrefix: 'build-sandbox-image: ',
  });
}
