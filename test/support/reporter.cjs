// The spec reporter, plus one closing line that any CI can read: "mocha: N passed, N failed, N skipped".
const Mocha = require("mocha");

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once("end", () => {
      const { passes, failures, pending } = this.stats;
      process.stdout.write(`\nmocha: ${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SpecWithSummary;
