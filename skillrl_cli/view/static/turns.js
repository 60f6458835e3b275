// Step through an episode's turns: one shown at a time, previous/next buttons and arrow keys.
(function () {
  const turns = Array.from(document.querySelectorAll(".turn"));
  const label = document.getElementById("turn-label");
  let current = 0;
  function show(i) {
    if (!turns.length) return;
    current = Math.max(0, Math.min(turns.length - 1, i));
    turns.forEach((t, k) => t.classList.toggle("shown", k === current));
    label.textContent = "turn " + (current + 1) + " of " + turns.length;
  }
  document.getElementById("prev").addEventListener("click", () => show(current - 1));
  document.getElementById("next").addEventListener("click", () => show(current + 1));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight") show(current + 1);
    if (e.key === "ArrowLeft") show(current - 1);
  });
})();
