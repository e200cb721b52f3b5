/**
 * The owner's workflows (§4.14).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createWorkflowsService, NODE_TYPES, type WorkflowsService } from './workflows.service.ts';
