/**
 * The sum of the samples of a Prometheus exposition that carry every one of `labels` (as a
 * PromQL selector picks them, other labels ignored); 0 when none.
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m?.[1] !== name) continue;
    const have = new Set((m[2] ?? "").split(/,(?=[a-zA-Z_]\w*=")/));
    if (wanted.every((w) => have.has(w))) sum += Number(m[3]);
  }
  return sum;
}
