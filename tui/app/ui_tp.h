/* ui_tp: the tensor-parallel view: one row per rank with the KV heads it
 * holds (each head its own colour and number; "copy" when tp exceeds the
 * KV-head count and heads are replicated), its memory bar and its share of
 * the KV pool. During the start-up replay the heads deal out rank by rank. */
#ifndef UI_TP_H
#define UI_TP_H

#include "ui_views.h"

extern const ui_view_class ui_view_tp;

#endif
