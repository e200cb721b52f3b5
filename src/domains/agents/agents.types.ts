/** Domain names for agent columns, derived from the generated row types (src/db/types.gen.ts). */
import type { Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type DeploymentStatus = Selectable<DB['deployments']>['status'];
