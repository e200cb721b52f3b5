/** Being built (issue in progress): replaced by the Kubernetes driver. */
import type { HostingDriver } from './driver.ts';

export type KubernetesDriverOptions = { kubeconfig?: string | undefined; namespace: string; image: string };

export function createKubernetesDriver(_options: KubernetesDriverOptions): HostingDriver {
  throw new Error('HOSTING_DRIVER=kubernetes is not available yet');
}
