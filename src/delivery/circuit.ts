/**
 * A provider's circuit (docs/routing.md#availability): closed while it answers; open for `openMs`
 * after `failures` failed submits in a row; then half-open: one message probes it, and the probe's
 * outcome closes or opens it again. Kept per process: each one judges what its own sends saw.
 */
export class Circuit {
  private failuresInRow = 0;
  private openUntil = 0;
  private probing = false;

  constructor(
    private readonly o: { failures: number; openMs: number; now: () => number },
    /** Told each time the circuit opens or closes. */
    private readonly changed: (open: boolean) => void = () => undefined,
  ) {}

  /** False while open, or half-open with its probe out. */
  isAvailable(): boolean {
    if (this.openUntil === 0) return true;
    return !this.probing && this.o.now() >= this.openUntil;
  }

  /** Takes a place to send: true when the provider may be tried now (a half-open circuit gives one). */
  take(): boolean {
    if (this.openUntil === 0) return true;
    if (this.probing || this.o.now() < this.openUntil) return false;
    this.probing = true;
    return true;
  }

  /** Gives back a place taken for a send that never went out (its call was cut first). */
  release(): void {
    this.probing = false;
  }

  succeeded(): void {
    this.failuresInRow = 0;
    this.probing = false;
    if (this.openUntil !== 0) {
      this.openUntil = 0;
      this.changed(false);
    }
  }

  failed(): void {
    this.failuresInRow += 1;
    const wasOpen = this.openUntil !== 0;
    // A send started before the circuit opened, failing late, does not keep it open longer.
    if (wasOpen && !this.probing) return;
    if (this.probing || this.failuresInRow >= this.o.failures) {
      this.probing = false;
      this.openUntil = this.o.now() + this.o.openMs;
      if (!wasOpen) this.changed(true);
    }
  }

  /** Open (a half-open one included): metrics report it unavailable. */
  isOpen(): boolean {
    return this.openUntil !== 0;
  }
}
