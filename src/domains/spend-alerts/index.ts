/**
 * Spend alerts (docs/payments.md "Spend alerts"): thresholds on a user's balance and on each
 * agent's monthly spend, told once per crossing.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export type { DueAlert } from './spend-alerts.repo.ts';
export { ALERT_THRESHOLD_MAX_USD, createSpendAlerts, type SpendAlerts } from './spend-alerts.service.ts';
