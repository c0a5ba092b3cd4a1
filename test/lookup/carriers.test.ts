import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect } from "chai";
import { getCountries, getCountryCallingCode, getExampleNumber } from "libphonenumber-js/max";
import examples from "libphonenumber-js/mobile/examples";
import { carrier as libraryCarrier } from "libphonenumber-geo-carrier";
import { parsePhoneNumberFromString as parseCjs } from "libphonenumber-js";
import { callingCodesWithCarriers, carrierOf } from "../../src/lookup/carriers.js";

/** The bounds docs/capacity.md promises for the carrier tables kept in memory (measured, with room). */
const TABLE_BYTES_MAX = 1_200_000;
const ALL_TABLES_BYTES_MAX = 4_000_000;

/**
 * Numbers of every country: its example mobile number with its last five digits run through a
 * spread of values, so that many ranges of each calling code are asked.
 */
function numbersOfEveryCountry(perCountry: number): string[] {
  const out: string[] = [];
  for (const country of getCountries()) {
    const example = getExampleNumber(country, examples)?.number;
    if (example === undefined) continue;
    for (let i = 0; i < perCountry; i++) {
      const tail = String((i * 7_919 + 31) % 100_000).padStart(5, "0");
      out.push(example.slice(0, -5) + tail);
    }
    // A few of the country's numbers with a shorter or longer national part than the example's.
    out.push(example.slice(0, -1), `${example}1`, `+${getCountryCallingCode(country)}1`);
  }
  return out;
}

describe("carrier tables (src/lookup/carriers.ts)", function () {
  this.timeout(120_000);

  it("answers what libphonenumber-geo-carrier answers, for numbers of every country", async () => {
    const numbers = numbersOfEveryCountry(20);
    expect(numbers.length).to.be.greaterThan(4_000);
    let named = 0;
    for (const e164 of numbers) {
      const phone = parseCjs(e164);
      if (phone === undefined) continue;
      // The library's own typings name libphonenumber-js's CommonJS class; this is that class.
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
      const expected = ((await libraryCarrier(phone, "en")) ?? "").trim();
      const actual = await carrierOf(String(phone.countryCallingCode), String(phone.nationalNumber));
      expect(actual, e164).to.equal(expected);
      if (actual !== "") named++;
    }
    // Most example mobiles have a carrier: the comparison is not between empty answers.
    expect(named).to.be.greaterThan(2_000);
  });

  it("answers '' for a calling code without a table, and for a range the data does not name", async () => {
    const codes = new Set(await callingCodesWithCarriers());
    expect(codes.has("33")).to.equal(true);
    expect(codes.has("800")).to.equal(false);
    expect(await carrierOf("800", "12345678")).to.equal("");
    expect(await carrierOf("33", "112345678")).to.equal("");
    expect(await carrierOf("33", "612345678")).to.equal("SFR");
  });

  it(`keeps each calling code's table in at most ${TABLE_BYTES_MAX} bytes, and all of them in ${ALL_TABLES_BYTES_MAX}`, async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--expose-gc", "--import", "tsx", "test/support/carrier-memory.ts"],
      { maxBuffer: 1 << 20 },
    );
    const measured = JSON.parse(stdout) as { tables: number; total: number; perCode: Record<string, number> };
    const biggest = Object.entries(measured.perCode)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([code, bytes]) => `+${code} ${bytes}`);
    console.log(
      `      ${measured.tables} tables: ${measured.total} bytes in all; biggest ${biggest.join(", ")}`,
    );
    expect(measured.tables).to.be.greaterThan(200);
    for (const [code, bytes] of Object.entries(measured.perCode)) {
      expect(bytes, `+${code}`).to.be.at.most(TABLE_BYTES_MAX);
    }
    expect(measured.total).to.be.at.most(ALL_TABLES_BYTES_MAX);
  });
});
