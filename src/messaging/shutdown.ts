import { RingfenceError } from "../errors.js";

/**
 * Tells the message providers when the service stops taking work. Once shutdown has begun, a
 * message that could not finish before the calls in flight are cut (the provider's own timeout
 * is longer than the grace left) is refused before the provider is contacted, so no call is cut
 * after its message went out.
 */
export class ShutdownGate {
  private endsAtMs: number | undefined;

  /** Shutdown began: calls in flight are cut at `endsAtMs` (Date.now() clock). */
  begin(endsAtMs: number): void {
    this.endsAtMs = endsAtMs;
  }

  /** Throws `unavailable` when a message that may take `timeoutMs` could not finish in time. */
  check(timeoutMs: number): void {
    if (this.endsAtMs === undefined) return;
    const left = this.endsAtMs - Date.now();
    if (left > timeoutMs) return;
    throw new RingfenceError("unavailable", "the service is shutting down; nothing was sent, try again", {
      "retry-after": "1",
    });
  }
}

/** The same provider, whose `send` first asks the gate; undefined gate: unchanged. */
export function gateSends<P extends { send(msg: never): Promise<unknown> }>(
  provider: P,
  timeoutMs: number,
  gate: ShutdownGate | undefined,
): P {
  if (gate === undefined) return provider;
  const send = provider.send.bind(provider);
  const gated: P["send"] = async (msg) => {
    gate.check(timeoutMs);
    return send(msg);
  };
  provider.send = gated;
  return provider;
}
