import type { CallScope } from "../observability/calls.js";
/**
 * One message to send (an SMS, or the same message for another channel). `body` holds the code:
 * it is never logged outside the log provider.
 */
export interface OutgoingSms {
  /** Destination, E.164 (`+33612345678`). */
  to: string;
  /** Sender ID (up to 11 letters or digits) or a number. */
  from: string;
  body: string;
  /** BCP-47 locale of the body. */
  locale: string;
  /** Our id of this message, unique per message. */
  reference: string;
  /**
   * The code in clear, for channels whose message carries it as a parameter (WhatsApp's template)
   * rather than in `body`; never logged. The engine sets it.
   */
  code?: string;
}

export interface SentSms {
  /** The id the provider gave (SMPP message_id), or our reference when it gave none. */
  providerId: string;
}

export type DeliveryState = "delivered" | "failed" | "expired" | "rejected" | "unknown" | "accepted";

export interface DeliveryReceipt {
  /** The `providerId` that `send` answered for this message. */
  providerId: string;
  state: DeliveryState;
  /** The provider's own status word, e.g. `DELIVRD`. */
  providerStatus: string;
  /** The provider's error code, when it reports one other than zero. */
  errorCode?: string;
  /** When the receipt arrived, RFC 3339. */
  at: string;
}

export interface SmsProvider {
  /**
   * Who delivers: the provider's identity in metrics, logs and the message ids stored for its
   * receipts (an open name: every provider, of any protocol, has one).
   */
  readonly name: string;
  /**
   * The longest a `send` may take before it is refused for lack of an answer (the provider's own
   * timeout): a charge held for a send is recovered only after it (src/verify/holds.ts).
   */
  readonly longestSendMs: number;
  /**
   * Resolves once the provider has accepted the message; rejects with a DeliveryError otherwise.
   * `call` is the call it is sent for (none for a background re-send): its deadline, its log.
   */
  send(msg: OutgoingSms, call?: CallScope): Promise<SentSms>;
  /** Delivery receipts, as they arrive (the SMPP provider only). */
  onReceipt(listener: (r: DeliveryReceipt) => void): void;
  /** False while it cannot take a message at all (an SMPP bind down); absent: always worth a try. */
  available?(): boolean;
  close(): Promise<void>;
}

/**
 * A message the provider did not accept, as far as we know. The message says why and never holds
 * the body; `retryable` tells a queue whether trying again later may succeed (timeouts,
 * throttling, 5xx); `outcomeUnknown` says the provider may have accepted it all the same (no
 * answer after the request went out), so only a re-send of the same reference can tell.
 */
export class DeliveryError extends Error {
  override readonly name = "DeliveryError";
  readonly outcomeUnknown: boolean;
  constructor(
    message: string,
    readonly retryable = true,
    options?: ErrorOptions & { outcomeUnknown?: boolean },
  ) {
    super(message, options);
    this.outcomeUnknown = options?.outcomeUnknown ?? false;
  }
}

/** Delivery-receipt listeners; one that throws is logged and does not stop the others. */
export class ReceiptListeners {
  private readonly listeners: ((r: DeliveryReceipt) => void)[] = [];
  constructor(private readonly onListenerError: (err: unknown) => void) {}

  add(listener: (r: DeliveryReceipt) => void): void {
    this.listeners.push(listener);
  }

  emit(receipt: DeliveryReceipt): void {
    for (const listener of this.listeners) {
      try {
        listener(receipt);
      } catch (err) {
        this.onListenerError(err);
      }
    }
  }
}
