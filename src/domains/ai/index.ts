/**
 * The AI layer (§4.9, §4.10): the model catalogue, plan rules, providers, the model gateway agents call, usage, budgets and spend holds.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { AGENT_BUDGET_MAX_USD, AGENT_BUDGET_MIN_USD, type AgentBudgets } from './agent-budgets.service.ts';
export { type AiService, createAiService } from './ai.service.ts';
export * from './ai-chat.schemas.ts';
export { settleVerdict } from './ai-limits.service.ts';
export { DEMO_UNAVAILABLE } from './demo-chat.service.ts';
export { AUTO_MODEL, agentModelEnv, createOwnerModels } from './model-choice.service.ts';
export * from './model-gateway.schemas.ts';
export { MODEL_PRICE_MAX } from './model-prices.service.ts';
export { type AiActor, checkPlan, checkStoredPlan, type StoredPlan } from './plan.rules.ts';
export { type ChatProvider, PROVIDER_NAMES, type ProviderName } from './providers/provider.contract.ts';
export { createProviders } from './providers/provider-registry.service.ts';
export { createStoredPlans, type StoredPlans } from './stored-plans.service.ts';
export { createUsageReport, USAGE_DAYS_MAX, type UsageReportFn } from './usage-report.service.ts';
export type { UsageStore } from './usage-store.service.ts';
