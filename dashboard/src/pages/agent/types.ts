import type { paths } from '../../api/openapi.gen.ts';

/** An agent as GET /api/agents/:id returns it. */
export type Agent = paths['/api/agents/{id}']['get']['responses'][200]['content']['application/json']['agent'];
