/* Bandwidth budgets: a token bucket per direction (receive, send) for an engine, a group of
 * requests (tern_bandwidth_t) or one request's sending, and a meter of the bytes that went
 * through it over about the last second. No request or connection in sight: conn.c debits the
 * socket bytes it reads and writes and waits as long as the buckets say.
 *
 * The bucket's balance is what may go now; it refills at `rate` bytes per second up to a tenth
 * of a second's worth (the burst bound) and goes negative when bytes are debited beyond it.
 * A debtor waits until the debt standing at its own debit is paid: its mark is the cumulative
 * credit that pays it, so later debtors never delay earlier ones and every connection under a
 * bucket gets its turn in the order it read (or wrote): shares are fair, none starves, and over
 * time exactly `rate` bytes per second go through. A bucket's budget is locked and its meter
 * atomic, so one tern_bandwidth_t may serve requests of several engines. */
#include "internal.h"

#define NS_PER_S  1000000000.0
#define SLOT_NS   (100u * 1000000u) /* the meter's resolution */
#define MIN_PIECE 512u

static void bucket_init(tern__bucket *b, uint64_t rate) {
  atomic_init(&b->rate, rate);
  b->balance = 0;
  b->credits = 0;
  b->stamp_ns = uv_hrtime();
  for (unsigned s = 0; s < TERN__METER_SLOTS; s++) {
    atomic_init(&b->slot_bytes[s], 0);
    atomic_init(&b->slot_epoch[s], 0);
  }
}

/* The most the balance may hold: a tenth of a second of the rate. */
static double burst(uint64_t rate) { return (double)rate / 10.0; }

/* Credits what the rate earned since the last refill. Locked. */
static void refill(tern__bucket *b, uint64_t now) {
  uint64_t rate = atomic_load_explicit(&b->rate, memory_order_relaxed);
  if (now > b->stamp_ns && rate) {
    double add = (double)rate * (double)(now - b->stamp_ns) / NS_PER_S;
    b->credits += add;
    b->balance += add;
    if (b->balance > burst(rate)) b->balance = burst(rate);
  }
  b->stamp_ns = now;
}

/* Counts n bytes in the slot of `now`, lock-free. Whoever moves a slot to a new epoch empties it;
 * bytes another thread adds to that slot between the move and the emptying are lost. A meter
 * may miss that much once per slot (100 ms), where a lock per read and write cost every request
 * about 100 instructions on its loop thread. */
static void meter_add(tern__bucket *b, uint64_t now, size_t n) {
  uint64_t epoch = now / SLOT_NS;
  unsigned s = (unsigned)(epoch % TERN__METER_SLOTS);
  uint64_t seen = atomic_load_explicit(&b->slot_epoch[s], memory_order_relaxed);
  if (seen != epoch &&
      atomic_compare_exchange_strong_explicit(&b->slot_epoch[s], &seen, epoch, memory_order_relaxed,
                                              memory_order_relaxed))
    atomic_store_explicit(&b->slot_bytes[s], 0, memory_order_relaxed);
  atomic_fetch_add_explicit(&b->slot_bytes[s], n, memory_order_relaxed);
}

double tern__bucket_debit(tern__bucket *b, size_t n) {
  uint64_t now = uv_hrtime();
  double mark = -1;
  meter_add(b, now, n);
  /* No rate: nothing to debit, and no lock taken (a rate set meanwhile counts from its own
   * start, as bucket_set_rate's refill does). */
  if (atomic_load_explicit(&b->rate, memory_order_relaxed) == 0) return mark;
  uv_mutex_lock(&b->lock);
  if (atomic_load_explicit(&b->rate, memory_order_relaxed)) {
    refill(b, now);
    b->balance -= (double)n;
    if (b->balance < 0) mark = b->credits - b->balance;
  }
  uv_mutex_unlock(&b->lock);
  return mark;
}

uint64_t tern__bucket_wait_ns(tern__bucket *b, double mark) {
  uint64_t now = uv_hrtime();
  uint64_t ns = 0;
  uv_mutex_lock(&b->lock);
  refill(b, now);
  uint64_t rate = atomic_load_explicit(&b->rate, memory_order_relaxed);
  if (rate && b->credits < mark) ns = (uint64_t)((mark - b->credits) * NS_PER_S / (double)rate) + 1;
  uv_mutex_unlock(&b->lock);
  return ns;
}

size_t tern__bucket_piece(tern__bucket *b) {
  return tern__rate_piece(atomic_load_explicit(&b->rate, memory_order_relaxed));
}

size_t tern__rate_piece(uint64_t rate) {
  if (rate == 0) return SIZE_MAX;
  uint64_t piece = rate / 20; /* half the burst: a read or write never overdraws much */
  if (piece < MIN_PIECE) piece = MIN_PIECE;
  return piece > SIZE_MAX ? SIZE_MAX : (size_t)piece;
}

static void bucket_set_rate(tern__bucket *b, uint64_t rate) {
  uint64_t now = uv_hrtime();
  uv_mutex_lock(&b->lock);
  refill(b, now); /* what was earned at the old rate */
  atomic_store_explicit(&b->rate, rate, memory_order_relaxed);
  if (rate == 0) {
    b->balance = 0; /* a budget set later starts with neither debt nor savings */
  } else if (b->balance > burst(rate)) {
    b->balance = burst(rate);
  }
  uv_mutex_unlock(&b->lock);
}

/* Average bytes per second over the last second: the full slots of the last 0.9 s and the one
 * under way. */
static uint64_t bucket_used(tern__bucket *b) {
  uint64_t now = uv_hrtime();
  uint64_t epoch = now / SLOT_NS;
  uint64_t sum = 0;
  for (unsigned s = 0; s < TERN__METER_SLOTS; s++) {
    uint64_t at = atomic_load_explicit(&b->slot_epoch[s], memory_order_relaxed);
    if (at + TERN__METER_SLOTS > epoch && at <= epoch)
      sum += atomic_load_explicit(&b->slot_bytes[s], memory_order_relaxed);
  }
  uint64_t window = (uint64_t)(TERN__METER_SLOTS - 1) * SLOT_NS + (now - epoch * SLOT_NS);
  return (uint64_t)((double)sum * NS_PER_S / (double)window);
}

/* ---- what a connection owes ---- */

bool tern__debts_add(tern__debt d[3], tern_bandwidth_t *const bws[3], int dir, size_t n) {
  bool owe = false;
  for (int i = 0; i < 3; i++) {
    double mark = bws[i] ? tern__bucket_debit(&bws[i]->dir[dir], n) : -1;
    if (mark < 0) continue;
    if (d[i].bw != bws[i]) {
      tern__bandwidth_ref(bws[i]);
      tern__bandwidth_unref(d[i].bw);
      d[i].bw = bws[i];
    }
    d[i].mark = mark;
    owe = true;
  }
  return owe;
}

uint64_t tern__debts_owed(tern__debt d[3], int dir) {
  uint64_t most = 0;
  for (int i = 0; i < 3; i++) {
    if (d[i].bw == NULL) continue;
    uint64_t ns = tern__bucket_wait_ns(&d[i].bw->dir[dir], d[i].mark);
    if (ns == 0) {
      tern__bandwidth_unref(d[i].bw);
      d[i].bw = NULL;
    }
    if (ns > most) most = ns;
  }
  return most;
}

void tern__debts_drop(tern__debt d[3]) {
  for (int i = 0; i < 3; i++) {
    tern__bandwidth_unref(d[i].bw);
    d[i].bw = NULL;
  }
}

size_t tern__budgets_piece(tern_bandwidth_t *const bws[3], int dir) {
  size_t piece = SIZE_MAX;
  for (int i = 0; i < 3; i++) {
    size_t p = bws[i] ? tern__bucket_piece(&bws[i]->dir[dir]) : SIZE_MAX;
    if (p < piece) piece = p;
  }
  return piece;
}

/* ---- budgets ---- */

int tern_bandwidth_new(tern_bandwidth_t **out, uint64_t recv_bps, uint64_t send_bps) {
  if (out == NULL) return TERN_EINVAL;
  *out = NULL;
  tern_bandwidth_t *bw = tern__calloc(1, sizeof *bw);
  if (bw == NULL) return TERN_ENOMEM;
  if (uv_mutex_init(&bw->dir[TERN__RECV].lock)) {
    free(bw);
    return TERN_ENOMEM;
  }
  if (uv_mutex_init(&bw->dir[TERN__SEND].lock)) {
    uv_mutex_destroy(&bw->dir[TERN__RECV].lock);
    free(bw);
    return TERN_ENOMEM;
  }
  bucket_init(&bw->dir[TERN__RECV], recv_bps);
  bucket_init(&bw->dir[TERN__SEND], send_bps);
  atomic_init(&bw->refs, 1);
  *out = bw;
  return 0;
}

void tern__bandwidth_ref(tern_bandwidth_t *bw) {
  atomic_fetch_add_explicit(&bw->refs, 1, memory_order_relaxed);
}

void tern__bandwidth_unref(tern_bandwidth_t *bw) {
  if (bw == NULL || atomic_fetch_sub_explicit(&bw->refs, 1, memory_order_acq_rel) != 1) return;
  uv_mutex_destroy(&bw->dir[TERN__RECV].lock);
  uv_mutex_destroy(&bw->dir[TERN__SEND].lock);
  free(bw);
}

void tern_bandwidth_free(tern_bandwidth_t *bw) { tern__bandwidth_unref(bw); }

int tern_bandwidth_set_max_speed(tern_bandwidth_t *bw, uint64_t recv_bps, uint64_t send_bps) {
  if (bw == NULL) return TERN_EINVAL;
  bucket_set_rate(&bw->dir[TERN__RECV], recv_bps);
  bucket_set_rate(&bw->dir[TERN__SEND], send_bps);
  return 0;
}

int tern_bandwidth_get_used(tern_bandwidth_t *bw, uint64_t *recv_bps, uint64_t *send_bps) {
  if (bw == NULL) return TERN_EINVAL;
  if (recv_bps) *recv_bps = bucket_used(&bw->dir[TERN__RECV]);
  if (send_bps) *send_bps = bucket_used(&bw->dir[TERN__SEND]);
  return 0;
}
