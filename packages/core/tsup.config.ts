import { packageBuild } from '../../tsup.base.config.js';

export default packageBuild({
  index: 'src/index.ts',
  ports: 'src/ports.ts',
  schemas: 'src/schemas.ts',
  testing: 'src/testing/index.ts',
});
