/**
 * The part of `smpp` 0.5.1 (CommonJS, no bundled types) that src/messaging and its tests use.
 * Field names are those of the SMPP specification; a decoded PDU carries them as own properties.
 */
declare module "smpp" {
  import type { EventEmitter } from "node:events";
  import type { Server as NetServer, Socket } from "node:net";

  namespace smpp {
    /** A decoded text field: the library decodes `short_message` by its `data_coding`. */
    type MessageField = string | Buffer | { message: string | Buffer; udh?: Buffer[] };

    class PDU {
      constructor(command: string, options?: Record<string, unknown>);
      command: string;
      command_id: number;
      command_status: number;
      sequence_number: number;
      system_id?: string;
      password?: string;
      interface_version?: number;
      message_id?: string;
      service_type?: string;
      source_addr_ton?: number;
      source_addr_npi?: number;
      source_addr?: string;
      dest_addr_ton?: number;
      dest_addr_npi?: number;
      destination_addr?: string;
      esm_class?: number;
      registered_delivery?: number;
      data_coding?: number | null;
      short_message?: MessageField;
      message_payload?: MessageField;
      receipted_message_id?: string;
      message_state?: number;
      network_error_code?: Buffer;
      isResponse(): boolean;
      /** The response PDU of a request (a `generic_nack` for an unknown command). */
      response(options?: Record<string, unknown>): PDU;
    }

    type PduEvent =
      | "pdu"
      | "unknown"
      | "bind_transceiver"
      | "deliver_sm"
      | "enquire_link"
      | "submit_sm"
      | "unbind"
      | "unbind_resp";
    type Callback = (pdu: PDU) => void;

    interface Session extends EventEmitter {
      readonly socket: Socket;
      on(event: PduEvent, listener: Callback): this;
      on(event: "error", listener: (err: Error) => void): this;
      on(event: "connect" | "secureConnect" | "close", listener: () => void): this;
      once(event: "close", listener: () => void): this;
      /** Returns false, sending nothing, when the socket is no longer writable. */
      send(pdu: PDU, responseCallback?: Callback, sendCallback?: Callback): boolean;
      bind_transceiver(options: Record<string, unknown>, responseCallback?: Callback): boolean;
      submit_sm(options: Record<string, unknown>, responseCallback?: Callback): boolean;
      deliver_sm(options: Record<string, unknown>, responseCallback?: Callback): boolean;
      enquire_link(options: Record<string, unknown>, responseCallback?: Callback): boolean;
      unbind(options: Record<string, unknown>, responseCallback?: Callback): boolean;
      pause(): void;
      resume(): void;
      /** Ends the socket (half-close); `callback` runs on the socket's `close`. */
      close(callback?: () => void): void;
      destroy(callback?: () => void): void;
    }

    interface Server extends NetServer {
      readonly sessions: Session[];
      on(event: "session", listener: (session: Session) => void): this;
      on(event: string, listener: (...args: unknown[]) => void): this;
    }

    interface ConnectOptions {
      host: string;
      port: number;
      tls?: boolean;
    }

    function connect(options: ConnectOptions): Session;
    function createServer(listener?: (session: Session) => void): Server;
    /** Command status names (`ESME_RINVPASWD`, ...) to their numbers. */
    const errors: Readonly<Record<string, number>>;
  }
  export = smpp;
}
