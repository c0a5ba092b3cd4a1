import { expect } from "chai";
import smpp from "smpp";
import { createLogger, silentLogger } from "../../src/log.js";
import {
  DeliveryError,
  SmppSmsProvider,
  parseSmppUrl,
  type DeliveryReceipt,
  type OutgoingSms,
} from "../../src/messaging/sms.js";
import { parseReceipt } from "../../src/messaging/smpp-provider.js";
import { renderOtpSms } from "../../src/messaging/templates.js";
import { FakeSmsc, eventually, messageText } from "../support/fake-smsc.js";

const message: OutgoingSms = {
  to: "+33612345678",
  from: "Ringfence",
  body: "Your verification code is 482913. It expires in 10 minutes.",
  locale: "en-US",
  reference: "ref-1",
};

describe("SMPP provider", () => {
  let smsc: FakeSmsc;
  const providers: SmppSmsProvider[] = [];
  const open = (url: string, options: Partial<ConstructorParameters<typeof SmppSmsProvider>[1]> = {}) => {
    const provider = new SmppSmsProvider(url, {
      log: silentLogger,
      submitTimeoutMs: 2_000,
      reconnectMinMs: 50,
      reconnectMaxMs: 200,
      ...options,
    });
    providers.push(provider);
    return provider;
  };

  beforeEach(async () => {
    smsc = await FakeSmsc.start();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
    await smsc.close();
  });

  it("binds as transceiver with the URL's system_id and password, in SMPP 3.4", async () => {
    const provider = open(smsc.url());
    await provider.send(message);
    expect(smsc.binds).to.deep.equal([
      { system_id: "ringfence", password: "s3cret", interface_version: 0x34, accepted: true },
    ]);
  });

  it("submits the message with its addresses, the text in GSM-7 and a receipt requested, and answers the message_id", async () => {
    const provider = open(smsc.url());
    const sent = await provider.send(message);
    expect(sent).to.deep.equal({ providerId: "msg-1" });
    expect(smsc.submits).to.have.length(1);
    const pdu = smsc.submits[0]!;
    expect(pdu).to.deep.include({
      source_addr_ton: 5,
      source_addr_npi: 0,
      source_addr: "Ringfence",
      dest_addr_ton: 1,
      dest_addr_npi: 1,
      destination_addr: "33612345678",
      registered_delivery: 1,
      data_coding: 0,
    });
    expect(messageText(pdu.short_message)).to.equal(message.body);
  });

  it("keeps accented Latin text that GSM-7 holds (French) in GSM-7", async () => {
    const provider = open(smsc.url());
    const body = "Votre code de vérification est 482913. Il expire dans 10 minutes.";
    await provider.send({ ...message, body, locale: "fr-FR" });
    expect(smsc.submits[0]!.data_coding).to.equal(0);
    expect(messageText(smsc.submits[0]!.short_message)).to.equal(body);
  });

  it("sends a numeric sender as an international number (TON 1, NPI 1) without its +", async () => {
    const provider = open(smsc.url());
    await provider.send({ ...message, from: "+14155550100" });
    expect(smsc.submits[0]).to.deep.include({
      source_addr_ton: 1,
      source_addr_npi: 1,
      source_addr: "14155550100",
    });
  });

  it("sends a body GSM-7 cannot hold (Greek, emoji) as UCS2, data_coding 8", async () => {
    const provider = open(smsc.url());
    const greek = "Ο κωδικός σας είναι 482913 🔐";
    await provider.send({ ...message, body: greek, locale: "el-GR" });
    const pdu = smsc.submits[0]!;
    expect(pdu.data_coding).to.equal(8);
    expect(messageText(pdu.short_message)).to.equal(greek);
  });

  it("sends a rendered Spanish text as UCS2, since GSM-7 has no ó", async () => {
    const provider = open(smsc.url());
    const { body, locale } = renderOtpSms({ code: "482913", locale: "es-MX", lifetimeMinutes: 10 });
    await provider.send({ ...message, body, locale });
    expect(smsc.submits[0]!.data_coding).to.equal(8);
    expect(messageText(smsc.submits[0]!.short_message)).to.equal(
      "Tu código de verificación es 482913. Expira en 10 minutos.",
    );
  });

  it("puts a text longer than one SMS in message_payload for the SMSC to split", async () => {
    const provider = open(smsc.url());
    const long = `Ο κωδικός σας είναι 482913. ${"Ισχύει για δέκα λεπτά. ".repeat(5)}`;
    await provider.send({ ...message, body: long });
    const pdu = smsc.submits[0]!;
    expect(pdu.data_coding).to.equal(8);
    expect(messageText(pdu.message_payload)).to.equal(long);
    expect(messageText(pdu.short_message)).to.equal("");
  });

  it("fails sends with a DeliveryError when the SMSC refuses the password, saying why without the password", async () => {
    const provider = open(smsc.url("wrong-pw"));
    const err = await provider.send(message).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(DeliveryError);
    expect((err as DeliveryError).message).to.match(/bind refused: ESME_RINVPASWD/);
    expect((err as DeliveryError).message).not.to.include("wrong-pw");
    expect((err as DeliveryError).retryable).to.equal(false);
    expect(smsc.binds[0]).to.include({ password: "wrong-pw", accepted: false });
    // Later sends fail at once rather than waiting for the timeout.
    const started = Date.now();
    await provider.send(message).then(
      () => expect.fail("sent"),
      (e: unknown) => expect(e).to.be.instanceOf(DeliveryError),
    );
    expect(Date.now() - started).to.be.below(1_000);
    expect(smsc.submits).to.have.length(0);
  });

  it("rejects with a DeliveryError naming the status when submit_sm_resp is not 0", async () => {
    const provider = open(smsc.url());
    smsc.behaviour.submitStatus = 0x58; // ESME_RTHROTTLED
    const err = await provider.send(message).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(DeliveryError);
    expect((err as DeliveryError).message).to.equal("SMPP submit_sm refused: ESME_RTHROTTLED (0x00000058)");
    expect((err as DeliveryError).message).not.to.include("482913");
    expect((err as DeliveryError).retryable).to.equal(true);
  });

  it("rejects with a DeliveryError when no submit_sm_resp comes within the submit timeout", async () => {
    const provider = open(smsc.url(), { submitTimeoutMs: 300 });
    smsc.behaviour.ignoreSubmits = true;
    const err = await provider.send(message).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(DeliveryError);
    expect((err as DeliveryError).message).to.match(/no submit_sm_resp within \d+ ms/);
  });

  it("rejects with a DeliveryError when no SMSC listens", async () => {
    const port = smsc.port;
    await smsc.close();
    smsc = await FakeSmsc.start(); // a live one for afterEach; the provider aims at the dead port
    const provider = open(`smpp://ringfence:s3cret@127.0.0.1:${port}`, { submitTimeoutMs: 300 });
    const err = await provider.send(message).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(DeliveryError);
    expect((err as DeliveryError).message).to.match(/not bound within 300 ms \(ECONNREFUSED\)/);
  });

  it("emits a delivery receipt from a deliver_sm receipt, and answers it with deliver_sm_resp", async () => {
    const provider = open(smsc.url());
    const receipts: DeliveryReceipt[] = [];
    provider.onReceipt((r) => receipts.push(r));
    const { providerId } = await provider.send(message);
    const resp = await smsc.deliver({
      source_addr: "33612345678",
      destination_addr: "Ringfence",
      esm_class: 0x04,
      short_message: `id:${providerId} sub:001 dlvrd:001 submit date:2501011200 done date:2501011201 stat:DELIVRD err:000 text:`,
      receipted_message_id: providerId,
      message_state: 2,
    });
    expect(resp.command).to.equal("deliver_sm_resp");
    expect(resp.command_status).to.equal(0);
    await eventually(() => receipts.length === 1);
    const [receipt] = receipts;
    expect(receipt).to.deep.include({ providerId: "msg-1", state: "delivered", providerStatus: "DELIVRD" });
    expect(receipt).not.to.have.property("errorCode");
    expect(Date.parse(receipt!.at)).to.be.closeTo(Date.now(), 5_000);
  });

  it("reads a receipt that has only the standard text, with its error code", async () => {
    const provider = open(smsc.url());
    const receipts: DeliveryReceipt[] = [];
    provider.onReceipt((r) => receipts.push(r));
    await provider.send(message);
    await smsc.deliver({
      source_addr: "33612345678",
      short_message:
        "id:msg-1 sub:001 dlvrd:000 submit date:2501011200 done date:2501011205 stat:UNDELIV err:034 text:",
    });
    await eventually(() => receipts.length === 1);
    expect(receipts[0]).to.deep.include({
      providerId: "msg-1",
      state: "failed",
      providerStatus: "UNDELIV",
      errorCode: "034",
    });
  });

  it("answers an incoming message that is not a receipt, and emits nothing for it", async () => {
    const provider = open(smsc.url());
    const receipts: DeliveryReceipt[] = [];
    provider.onReceipt((r) => receipts.push(r));
    await provider.send(message);
    const resp = await smsc.deliver({ source_addr: "33612345678", short_message: "STOP" });
    expect(resp.command_status).to.equal(0);
    expect(receipts).to.deep.equal([]);
  });

  it("keeps emitting receipts to other listeners when one listener throws", async () => {
    const provider = open(smsc.url());
    const receipts: DeliveryReceipt[] = [];
    provider.onReceipt(() => {
      throw new Error("listener bug");
    });
    provider.onReceipt((r) => receipts.push(r));
    await provider.send(message);
    await smsc.deliver({ esm_class: 0x04, short_message: "id:msg-1 stat:DELIVRD err:000" });
    await eventually(() => receipts.length === 1);
  });

  it("reconnects and binds again after the SMSC drops the session, then sends", async () => {
    const lines: string[] = [];
    const provider = open(smsc.url(), { log: createLogger("debug", (l) => lines.push(l)) });
    await provider.send(message);
    smsc.dropSessions();
    await eventually(() => smsc.binds.length === 2 && smsc.sessions.length === 1);
    const sent = await provider.send({ ...message, reference: "ref-2" });
    expect(sent.providerId).to.equal("msg-2");
    expect(smsc.submits).to.have.length(2);
    expect(lines.some((l) => l.includes('"smpp link down, reconnecting"'))).to.equal(true);
    expect(lines.join("")).not.to.include("s3cret");
  });

  it("waits for the rebind when a send comes while the link is down", async () => {
    const lines: string[] = [];
    const log = createLogger("debug", (l) => lines.push(l));
    const provider = open(smsc.url(), { log, reconnectMinMs: 300, reconnectMaxMs: 300 });
    await provider.send(message);
    smsc.dropSessions();
    await eventually(() => lines.some((l) => l.includes('"smpp link down, reconnecting"')));
    expect(smsc.binds).to.have.length(1);
    const sent = await provider.send({ ...message, reference: "ref-2" });
    expect(sent.providerId).to.equal("msg-2");
    expect(smsc.binds).to.have.length(2);
  });

  it("answers the SMSC's enquire_link", async () => {
    const provider = open(smsc.url());
    await provider.send(message);
    const resp = await smsc.enquireLink();
    expect(resp.command).to.equal("enquire_link_resp");
    expect(resp.command_status).to.equal(0);
  });

  it("sends enquire_link keep-alives, and rebuilds a link that leaves them unanswered", async () => {
    const provider = open(smsc.url(), { enquireLinkMs: 100 });
    await provider.send(message);
    await eventually(() => smsc.enquireLinks.length >= 2);
    expect(smsc.binds).to.have.length(1);
    smsc.behaviour.ignoreEnquireLinks = true;
    await eventually(() => smsc.binds.length === 2);
    smsc.behaviour.ignoreEnquireLinks = false;
    await eventually(() => smsc.sessions.length === 1);
    expect((await provider.send(message)).providerId).to.equal("msg-2");
  });

  it("unbinds on close and stops reconnecting; later sends fail with DeliveryError", async () => {
    const provider = open(smsc.url());
    await provider.send(message);
    await provider.close();
    expect(smsc.unbinds).to.have.length(1);
    await eventually(() => smsc.sessions.length === 0);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(smsc.binds).to.have.length(1);
    await provider.send(message).then(
      () => expect.fail("sent"),
      (e: unknown) => expect(e).to.be.instanceOf(DeliveryError),
    );
  });

  it("rejects an in-flight submit with a DeliveryError when the link drops before the answer", async () => {
    const provider = open(smsc.url());
    await provider.send(message);
    smsc.behaviour.ignoreSubmits = true;
    const pending = provider.send(message).then(
      () => undefined,
      (e: unknown) => e,
    );
    await eventually(() => smsc.submits.length === 2);
    smsc.dropSessions();
    const err = await pending;
    expect(err).to.be.instanceOf(DeliveryError);
    expect((err as DeliveryError).message).to.equal("SMPP: connection lost before submit_sm_resp");
  });
});

describe("SMPP receipts and URL", () => {
  const receiptOf = (stat: string) =>
    parseReceipt(
      new smpp.PDU("deliver_sm", { esm_class: 4, short_message: { message: `id:abc stat:${stat} err:000` } }),
    );

  for (const [stat, state] of [
    ["DELIVRD", "delivered"],
    ["UNDELIV", "failed"],
    ["EXPIRED", "expired"],
    ["REJECTD", "rejected"],
    ["ACCEPTD", "accepted"],
    ["DELETED", "unknown"],
    ["UNKNOWN", "unknown"],
  ] as const) {
    it(`maps receipt status ${stat} to ${state}`, () => {
      expect(receiptOf(stat)).to.deep.include({ providerId: "abc", state, providerStatus: stat });
    });
  }

  it("reads the state of a receipt without text from its message_state TLV", () => {
    const pdu = new smpp.PDU("deliver_sm", { esm_class: 4, receipted_message_id: "abc", message_state: 3 });
    expect(parseReceipt(pdu)).to.deep.include({
      providerId: "abc",
      state: "expired",
      providerStatus: "EXPIRED",
    });
  });

  it("parses smpp://system_id:password@host:port, with 2775 as the default port", () => {
    expect(parseSmppUrl("smpp://rf%40x:p%3Ass@smsc.example:2776")).to.deep.equal({
      host: "smsc.example",
      port: 2776,
      systemId: "rf@x",
      password: "p:ss",
    });
    expect(parseSmppUrl("smpp://rf:pw@smsc.example").port).to.equal(2775);
  });

  it("refuses an SMPP URL without system_id or with another scheme", () => {
    expect(() => parseSmppUrl("smpp://smsc.example:2775")).to.throw(/system_id/);
    expect(() => parseSmppUrl("http://rf:pw@smsc.example")).to.throw(/smpp:\/\//);
    expect(() => parseSmppUrl("not a url")).to.throw(/SMPP_URL/);
  });
});
