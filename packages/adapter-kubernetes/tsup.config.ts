import { packageBuild } from '../../tsup.base.config.js';

export default packageBuild({ index: 'src/index.ts' });
