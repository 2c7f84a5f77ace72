/* ui_plot: the lesson's line plot (lab.plot): each series its own colour and
 * marker (o + x *) so it reads without colour, axes with their ranges, a
 * legend; log scale on y when asked (work per token: linear vs quadratic;
 * move vs recompute). */
#ifndef UI_PLOT_H
#define UI_PLOT_H

#include "ui_views.h"

extern const ui_view_class ui_view_plot;

#endif
