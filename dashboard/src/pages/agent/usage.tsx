/**
 * The Usage tab of an agent: its own model calls through the platform's AI gateway (GET /api/agents/:id/usage:
 * totals, per day, per model) and its monthly budget (PUT /api/agents/:id/budget). Past the budget the gateway
 * refuses the agent's calls until the budget is raised or cleared or the UTC month ends (docs/agents.md
 * "Usage and budgets"); this tab says so.
 */
import { type FormEvent, useEffect, useState } from 'react';
import { api, call } from '../../api/client.ts';
import { SpendAlert } from '../../spend-alert.tsx';
import { Button, DataTable, Empty, ErrorText, Field, formatUsd, Notice, Section, Spinner, useAction, useData } from '../../ui.tsx';
import { Chart, PeriodSelect, Totals, usageColumns } from '../usage.tsx';

const BUDGET_MAX = 100_000;

export function Usage({ agentId }: { agentId: string }) {
  const [days, setDays] = useState(30);
  const usage = useData(
    async () => call(api.GET('/api/agents/{id}/usage', { params: { path: { id: agentId }, query: { days } } })),
    [agentId, days],
  );
  const u = usage.data;
  return (
    <>
      {u && <Budget agentId={agentId} budget={u.budget} onSaved={usage.reload} />}
      {u && <SpendAlert agentId={agentId} />}
      <Section title="Usage" actions={<PeriodSelect days={days} onChange={setDays} />}>
        {usage.loading && !u ? <Spinner /> : null}
        <ErrorText error={!u ? usage.error : null} />
        {u && (
          <>
            <Totals totals={u.totals} />
            {u.totals.requests === 0 ? (
              <Empty>This agent made no model calls in this period.</Empty>
            ) : (
              <>
                <Chart daily={u.daily} metric="cost" />
                <DataTable
                  caption="Usage per day"
                  rowKey={(d) => d.date}
                  rows={u.daily.filter((d) => d.requests > 0).reverse()}
                  columns={[{ header: 'Day', cell: (d) => d.date }, ...usageColumns()]}
                />
              </>
            )}
          </>
        )}
      </Section>
      {u && u.byModel.length > 0 && (
        <Section title="By model">
          <DataTable
            caption="This agent's usage by model"
            rowKey={(m) => m.model}
            rows={u.byModel}
            columns={[{ header: 'Model', cell: (m) => m.model }, ...usageColumns()]}
          />
        </Section>
      )}
    </>
  );
}

type BudgetStatus = { monthlyBudgetUsd: number | null; monthToDateUsd: number; exceeded: boolean; periodStart: string };

/** The budget form: set (a number > 0, at most 100,000 USD) or clear; the warning once it is used up. */
function Budget({ agentId, budget, onSaved }: { agentId: string; budget: BudgetStatus; onSaved: () => Promise<void> }) {
  const [value, setValue] = useState(budget.monthlyBudgetUsd === null ? '' : String(budget.monthlyBudgetUsd));
  const [fieldError, setFieldError] = useState<string>();
  const [done, setDone] = useState<string>();
  const save = useAction();
  // a budget changed elsewhere (another tab, the API) shows up on reload
  useEffect(() => setValue(budget.monthlyBudgetUsd === null ? '' : String(budget.monthlyBudgetUsd)), [budget.monthlyBudgetUsd]);

  const put = async (monthlyBudgetUsd: number | null, message: string) => {
    setDone(undefined);
    const ok = await save.run(() =>
      call(api.PUT('/api/agents/{id}/budget', { params: { path: { id: agentId } }, body: { monthlyBudgetUsd } })),
    );
    if (ok) {
      setFieldError(undefined);
      await onSaved();
      setDone(message);
    }
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setDone(undefined);
    const n = Number(value.trim());
    const err =
      value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > BUDGET_MAX
        ? `Enter an amount greater than 0 and at most ${BUDGET_MAX.toLocaleString()} (USD), or use Clear for no budget.`
        : undefined;
    setFieldError(err);
    if (!err) await put(n, 'Budget saved.');
  };

  const b = budget.monthlyBudgetUsd;
  return (
    <Section title="Monthly budget">
      {budget.exceeded && b !== null && (
        <Notice kind="warning">
          Monthly budget used up: {formatUsd(budget.monthToDateUsd)} of {formatUsd(b)} spent since {budget.periodStart}. The platform
          refuses this agent's model calls until you raise or clear the budget, or the month ends.
        </Notice>
      )}
      {!budget.exceeded && (
        <p className="muted">
          {b === null
            ? `No budget: ${formatUsd(budget.monthToDateUsd)} spent since ${budget.periodStart} (UTC month).`
            : `${formatUsd(budget.monthToDateUsd)} of ${formatUsd(b)} spent since ${budget.periodStart} (UTC month).`}
        </p>
      )}
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field
          label="Monthly budget (USD)"
          error={fieldError}
          hint="Model calls through the platform are refused once this month's cost reaches it. Each call holds what it may cost while it runs, so calls at once go over by at most one call."
        >
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="number"
              inputMode="decimal"
              min="0.000001"
              max={BUDGET_MAX}
              step="any"
              value={value}
              onChange={(e) => setValue(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Button type="submit" kind="primary" busy={save.busy}>
          Save budget
        </Button>
        {b !== null && (
          <Button onClick={() => put(null, 'Budget cleared.')} busy={save.busy}>
            Clear
          </Button>
        )}
      </form>
      <ErrorText error={save.error} />
      {done && <Notice kind="success">{done}</Notice>}
    </Section>
  );
}
