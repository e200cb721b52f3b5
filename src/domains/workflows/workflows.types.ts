/** Domain names for workflow columns, derived from the generated row types (src/db/types.gen.ts). */
import type { Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type WorkflowNodeType = Selectable<DB['workflow_nodes']>['type'];
