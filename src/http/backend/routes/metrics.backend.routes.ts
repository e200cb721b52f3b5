/** GET /metrics of the backend app (docs/metrics.md), mounted only when METRICS_TOKEN is set. */
import { type AppMetrics, declareMetricsRoute } from '../../shared/metrics.ts';
import type { RouteModule } from '../../shared/routes.ts';

export const backendMetricsRoutes = (metrics: AppMetrics): RouteModule<'metrics'> => ({
  prefix: '',
  metrics: async (app) => declareMetricsRoute(app, metrics),
});
