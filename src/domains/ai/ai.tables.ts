/** Kysely types of the AI tables (migration 007), added to DB by module augmentation. */
import type { ColumnType, Generated } from 'kysely';

export interface AiUsageTable {
  id: Generated<string>;
  user_id: string;
  agent_id: string | null;
  model: string;
  provider: string;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** numeric: read back as a string by pg */
  cost: ColumnType<string, string | number, string | number>;
  created_at: Generated<Date>;
}

export interface AiUsageMonthlyTable {
  user_id: string;
  month: ColumnType<Date | string, string, string>;
  model: string;
  requests: Generated<number>;
  prompt_tokens: Generated<number>;
  completion_tokens: Generated<number>;
  total_tokens: Generated<number>;
  cost: ColumnType<string, string | number | undefined, string | number>;
}

declare module '../../db/schema.ts' {
  interface DB {
    ai_usage: AiUsageTable;
    ai_usage_monthly: AiUsageMonthlyTable;
  }
}
