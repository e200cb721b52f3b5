import { z } from 'zod';

/**
 * One log line as §4.7 lists them (GET /api/agents/:id/logs, the live stream, the history): shared
 * by the web app's agents and logs route modules, so neither imports the other.
 */
export const logLine = z.object({
  id: z.string(),
  timestamp: z.string(),
  level: z.string(),
  message: z.string(),
  source: z.string(),
  agentId: z.string(),
});
