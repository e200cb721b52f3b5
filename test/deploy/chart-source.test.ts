/**
 * The Helm chart's sources, checked with no helm (docs/production.md "How the chart is checked"):
 * its YAML files parse, every `.Values` path a template reads has a default in values.yaml, the CI
 * values set nothing values.yaml does not know, the settings it names are settings of
 * src/config/env.ts, the model provider and SMTP are named, and secrets go to the Secret, never the
 * ConfigMap (the ConfigMap's guard classifies every setting as this test does). Rendering, lint and
 * the Kubernetes schemas need helm: artefacts.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { allSettingNames, isSecretSetting, unknownSettings } from './settings.ts';

const ROOT = join(import.meta.dirname, '../..');
const CHART = join(ROOT, 'deploy/helm/agent-platform');
const read = (file: string) => readFileSync(join(CHART, file), 'utf8');
const templates = Object.fromEntries(readdirSync(join(CHART, 'templates')).map((f) => [f, read(join('templates', f))]));
const values = parse(read('values.yaml'));
const ciValues = parse(read('ci/production-values.yaml'));

type Tree = Record<string, unknown>;
const isMap = (v: unknown): v is Tree => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Maps of values.yaml whose keys are the operator's (settings, labels, Kubernetes fields). */
const FREE_FORM = new Set([
  'config',
  'secret.values',
  'web.resources',
  'backend.resources',
  'web.podAnnotations',
  'backend.podAnnotations',
  'web.nodeSelector',
  'backend.nodeSelector',
  'web.affinity',
  'backend.affinity',
  'ingress.annotations',
  'serviceAccount.annotations',
  'metrics.serviceMonitor.labels',
  'networkPolicy.dns.podLabels',
]);

/** The paths of `tree` that values.yaml does not have (below a free-form map anything goes). */
function unknownPaths(tree: Tree, defaults: Tree, prefix = ''): string[] {
  return Object.entries(tree).flatMap(([key, value]) => {
    const path = prefix ? `${prefix}.${key}` : key;
    if (!Object.hasOwn(defaults, key)) return [path];
    const known = defaults[key];
    if (FREE_FORM.has(path) || !isMap(value) || !isMap(known)) return [];
    return unknownPaths(value, known, path);
  });
}

describe('Helm chart sources (no helm needed)', () => {
  it('Chart.yaml is a v2 application chart named agent-platform with a version and an appVersion', () => {
    const chart = parse(read('Chart.yaml'));
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'agent-platform', type: 'application' });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(chart.appVersion).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('every .Values path the templates read has a default in values.yaml', () => {
    const paths = new Set(
      Object.values(templates).flatMap((t) => [...t.matchAll(/\.Values((?:\.[A-Za-z_]\w*)+)/g)].map((m) => m[1]!.slice(1))),
    );
    expect(paths.size).toBeGreaterThan(30);
    const missing = [...paths].filter((path) => {
      let node: unknown = values;
      for (const key of path.split('.')) {
        if (!isMap(node) || !Object.hasOwn(node, key)) return true;
        node = node[key];
      }
      return false;
    });
    expect(missing).toEqual([]);
    // the check can fail: a misspelt path is reported
    expect(unknownPaths({ secret: { existingSecrett: 'x' } }, values)).toEqual(['secret.existingSecrett']);
  });

  it('the CI values set only what values.yaml knows', () => {
    expect(unknownPaths(ciValues, values)).toEqual([]);
  });

  it('settings in config and secret.values are settings of src/config/env.ts; the secret ones are in secret.values only', () => {
    for (const tree of [values, ciValues]) {
      expect(unknownSettings({ ...tree.config, ...tree.secret.values })).toEqual([]);
      expect(Object.keys(tree.config).filter(isSecretSetting)).toEqual([]);
    }
    // the model provider and the mail server have their place: the provider's address in config,
    // its key and the SMTP URL (with its password) in the Secret
    expect(values.config.ROUTER_BASE_URL).toMatch(/^https:\/\//);
    expect(Object.keys(values.secret.values)).toEqual(expect.arrayContaining(['ROUTER_API_KEY', 'SMTP_URL', 'STRIPE_SECRET_KEY']));
    expect(ciValues.secret.values.ROUTER_API_KEY).toBeTruthy();
    expect(ciValues.secret.values.SMTP_URL).toMatch(/^smtps?:\/\//);
  });

  it("the ConfigMap's guard refuses exactly the secret settings of src/config/env.ts", () => {
    const cm = templates['configmap.yaml']!;
    const guard = cm.match(/regexMatch "([^"]+)" \$name\) \(not \(hasSuffix "([^"]+)" \$name\)\)/);
    expect(guard, 'configmap.yaml stops a secret setting in config').not.toBeNull();
    const [, pattern, publicSuffix] = guard!;
    const refused = (name: string) => new RegExp(pattern!).test(name) && !name.endsWith(publicSuffix!);
    const names = allSettingNames();
    expect(names.length).toBeGreaterThan(100);
    expect(names.filter(refused)).toEqual(names.filter(isSecretSetting));
    for (const name of ['SMTP_URL', 'ROUTER_API_KEY', 'OPENAI_API_KEY', 'STRIPE_SECRET_KEY', 'DATABASE_URL', 'KV_REST_API_TOKEN'])
      expect(refused(name), name).toBe(true);
    for (const name of ['ROUTER_BASE_URL', 'MAIL_FROM', 'CDP_IMPORT_PUBLIC_KEY', 'LOG_LEVEL']) expect(refused(name), name).toBe(false);
    // the ConfigMap reads config and the chart's own values only, never secret.values
    expect(cm).not.toContain('.Values.secret');
  });

  it('the Secret holds the four required keys and every other non-empty secret.values entry', () => {
    const secret = templates['secret.yaml']!;
    const required = [...secret.matchAll(/required "secret\.values\.(\w+) is required/g)].map((m) => m[1]);
    expect(required).toEqual(['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY', 'SECRETS_ENCRYPTION_KEY']);
    expect(secret).toContain(`range $name, $value := omit $s ${required.map((n) => `"${n}"`).join(' ')}`);
    expect(secret).toContain('{{- $s := .Values.secret.values }}');
  });
});
